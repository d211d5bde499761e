//! The ground floor for files, which every feature stands on and which knows none of them:
//! confining paths to a folder and opening them safely ([`confine`]), reading the files a project
//! supplies ([`project_file`]), writing a file whole ([`atomic`]) and naming bytes by their hash
//! ([`hash`]).

pub mod atomic;
pub mod confine;
pub mod hash;
pub mod project_file;
