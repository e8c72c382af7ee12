//! `dsh fs …` on the E2B composition, as a user runs it against a real
//! e2b-local server.

use e2b_local::harness::LocalServer;

use crate::e2b_shutdown::dsh_e2b;
use crate::fs::assert_streamed_write;

#[test]
fn stdin_streams_into_a_sandbox_file_in_bounded_memory() {
    let server = LocalServer::start();
    let command = dsh_e2b(&server, &["fs", "write", "--json", "big.dat"]);
    assert_streamed_write(command, 256 << 20);
}
