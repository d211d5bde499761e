/* Wine 8 (Debian bookworm's) has no bcryptprimitives.dll, whose ProcessPrng the Rust standard
   library takes its randomness from since Rust 1.78. For running the Windows build's tests under
   Wine in CI only (`.ci/run`): ProcessPrng over Wine's RtlGenRandom (advapi32's
   SystemFunction036). Never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
