//! AFL++ target `mcp`: see [`iapeer_fuzz::mcp`] for what it drives and checks.
fn main() {
    afl::fuzz!(|data: &[u8]| iapeer_fuzz::mcp(data));
}
