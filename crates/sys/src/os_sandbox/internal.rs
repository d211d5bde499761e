//! The addresses a name allowed through a wildcard (`*.example.org`) may not lead to: this
//! machine and the networks around it. Whoever owns the name owns its DNS and can point it at
//! `127.0.0.1`, at this machine's own public address, or at a router; only a name or address
//! the user listed exactly may lead there (the proxy's rule, see `proxy.rs`).
//!
//! Internal means: an address of one of this machine's interfaces (read afresh for each
//! connection: a public address is as much this machine as loopback is), and the ranges that
//! name no host on the internet: loopback, private, link-local, shared (CGNAT), documentation
//! and benchmarking, reserved, broadcast, multicast; for IPv6 also unique-local, site-local, and
//! the forms that carry an IPv4 address inside (mapped, compatible, NAT64, 6to4), which could
//! lead to any IPv4 address through a gateway.

// The proxy runs only where there are Unix-domain sockets; elsewhere this is unused.
#![cfg_attr(not(unix), allow(dead_code))]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
#[cfg(not(windows))]
use std::ptr;

/// IPv4 ranges that are no host on the internet, as (network, prefix length).
const V4_RANGES: &[(Ipv4Addr, u32)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8), // "this network", 0.0.0.0 is this machine
    (Ipv4Addr::new(10, 0, 0, 0), 8), // private
    (Ipv4Addr::new(100, 64, 0, 0), 10), // shared address space (CGNAT)
    (Ipv4Addr::new(127, 0, 0, 0), 8), // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16), // link-local (cloud metadata services)
    (Ipv4Addr::new(172, 16, 0, 0), 12), // private
    (Ipv4Addr::new(192, 0, 0, 0), 24), // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24), // documentation (TEST-NET-1)
    (Ipv4Addr::new(192, 168, 0, 0), 16), // private
    (Ipv4Addr::new(198, 18, 0, 0), 15), // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation (TEST-NET-2)
    (Ipv4Addr::new(203, 0, 113, 0), 24), // documentation (TEST-NET-3)
    (Ipv4Addr::new(224, 0, 0, 0), 4), // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4), // reserved, and broadcast
];

/// IPv6 ranges that are no host on the internet, or that carry an IPv4 address inside.
const V6_RANGES: &[(Ipv6Addr, u32)] = &[
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 96), // unspecified, loopback, IPv4-compatible
    (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96), // NAT64
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48), // NAT64, local use
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64), // discard
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16), // 6to4
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7), // unique local
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10), // link-local
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10), // site-local (deprecated)
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8), // multicast
];

/// Whether `ip` is this machine (one of `local`, its interfaces' addresses) or in a range that
/// is no host on the internet.
pub(super) fn is_internal(ip: IpAddr, local: &[IpAddr]) -> bool {
    if local.contains(&ip) {
        return true;
    }
    match ip {
        IpAddr::V4(v4) => in_v4_ranges(v4),
        // `::ffff:127.0.0.1` is 127.0.0.1 to the kernel.
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_internal(IpAddr::V4(v4), local),
            None => V6_RANGES
                .iter()
                .any(|&(net, prefix)| within(v6.to_bits(), net.to_bits(), prefix)),
        },
    }
}

fn in_v4_ranges(ip: Ipv4Addr) -> bool {
    V4_RANGES.iter().any(|&(net, prefix)| {
        within(
            u128::from(ip.to_bits()) << 96,
            u128::from(net.to_bits()) << 96,
            prefix,
        )
    })
}

/// Whether the first `prefix` bits (of 128) of `ip` are those of `net`.
fn within(ip: u128, net: u128, prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    ip & mask == net & mask
}

/// The addresses of this machine's interfaces, up or down. An error when they cannot be read:
/// then no address can be told to be external. (Where there are no Unix-domain sockets the
/// proxy does not run, and nothing is known.)
pub(super) fn local_addresses() -> io::Result<Vec<IpAddr>> {
    #[cfg(unix)]
    return interface_addresses();
    #[cfg(not(unix))]
    Ok(Vec::new())
}

#[cfg(unix)]
fn interface_addresses() -> io::Result<Vec<IpAddr>> {
    let mut list: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list that freeifaddrs releases below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: `entry` is a node of the list getifaddrs returned, not yet freed.
        let node = unsafe { &*entry };
        if !node.ifa_addr.is_null() {
            // SAFETY: a non-null `ifa_addr` points to a sockaddr of the family it names, as
            // large as that family's struct.
            let family = i32::from(unsafe { (*node.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: as above, a sockaddr_in.
                let sin = unsafe { &*(node.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    sin.sin_addr.s_addr,
                ))));
            } else if family == libc::AF_INET6 {
                // SAFETY: as above, a sockaddr_in6.
                let sin6 = unsafe { &*(node.ifa_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
            }
        }
        entry = node.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once, no node used after.
    unsafe { libc::freeifaddrs(list) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(not(windows), not(target_os = "macos")))]
    use std::fs;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn the_ranges_that_are_no_host_on_the_internet_are_internal_to_their_edges() {
        // Each range's first and last address, and the addresses just outside it.
        let inside = [
            "0.0.0.0",
            "0.255.255.255",
            "10.0.0.0",
            "10.255.255.255",
            "100.64.0.0",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.255",
            "169.254.0.0",
            "169.254.169.254",
            "169.254.255.255",
            "172.16.0.0",
            "172.31.255.255",
            "192.0.0.0",
            "192.0.0.255",
            "192.0.2.0",
            "192.0.2.2",
            "192.0.2.255",
            "192.168.0.0",
            "192.168.255.255",
            "198.18.0.0",
            "198.19.255.255",
            "198.51.100.0",
            "198.51.100.255",
            "203.0.113.0",
            "203.0.113.255",
            "224.0.0.0",
            "239.255.255.255",
            "240.0.0.0",
            "255.255.255.255",
            "::",
            "::1",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "64:ff9b::",
            "64:ff9b::93.184.216.34",
            "64:ff9b::ffff:ffff",
            "64:ff9b:1::",
            "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
            "100::",
            "100::ffff:ffff:ffff:ffff",
            "2001:db8::",
            "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
            "2002::",
            "2002:c000:0201::1",
            "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fc00::",
            "fd00::2",
            "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fe80::",
            "fe80::fc:ff:fe00:1",
            "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fec0::",
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "ff00::",
            "ff02::1",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ];
        let outside = [
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "191.255.255.255",
            "192.0.1.0",
            "192.0.3.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "223.255.255.255",
            "93.184.216.34",
            "8.8.8.8",
            "::ffff:93.184.216.34",
            "::1:0:0",
            "::fffe:ffff:ffff",
            "::1:0:0:0",
            "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff",
            "64:ff9b::1:0:0",
            "64:ff9b:0:ffff:ffff:ffff:ffff:ffff",
            "64:ff9b:2::",
            "ff::ffff:ffff:ffff:ffff",
            "100::1:0:0:0:0",
            "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff",
            "2001:db9::",
            "2001:4860:4860::8888",
            "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "2003::",
            "2606:2800:220:1::1",
            "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fe00::",
            "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ];
        for address in inside {
            assert!(is_internal(ip(address), &[]), "{address} is internal");
        }
        for address in outside {
            assert!(!is_internal(ip(address), &[]), "{address} is not internal");
        }
    }

    #[test]
    fn an_address_of_this_machine_is_internal_whatever_its_range() {
        let local = [ip("93.184.216.34"), ip("2606:2800:220:1::1")];
        assert!(is_internal(ip("93.184.216.34"), &local));
        assert!(is_internal(ip("2606:2800:220:1::1"), &local));
        // Mapped into IPv6, it is the same address to the kernel.
        assert!(is_internal(ip("::ffff:93.184.216.34"), &local[..1]));
        assert!(!is_internal(ip("::ffff:93.184.216.34"), &local[1..]));
        assert!(!is_internal(ip("93.184.216.35"), &local));
        assert!(!is_internal(ip("2606:2800:220:1::2"), &local));
    }

    #[cfg(unix)]
    #[test]
    fn this_machine_s_interfaces_are_read() {
        let local = local_addresses().expect("the interfaces");
        assert!(local.contains(&ip("127.0.0.1")), "{local:?}");
        // The IPv6 ones are those the kernel lists, no more (no other family read as one).
        #[cfg(target_os = "linux")]
        if let Ok(table) = fs::read_to_string("/proc/net/if_inet6") {
            let mut listed: Vec<IpAddr> = table
                .lines()
                .filter_map(|line| line.split_whitespace().next())
                .filter_map(|hex| u128::from_str_radix(hex, 16).ok())
                .map(|bits| IpAddr::V6(Ipv6Addr::from_bits(bits)))
                .collect();
            let mut read: Vec<IpAddr> = local.iter().copied().filter(IpAddr::is_ipv6).collect();
            listed.sort();
            read.sort();
            assert_eq!(read, listed);
        }
        // Every address read is internal, and the list has no duplicate of loopback's.
        for address in &local {
            assert!(is_internal(*address, &local));
        }
    }
}
