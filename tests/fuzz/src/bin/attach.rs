//! AFL++ target `attach`: see [`iapeer_fuzz::attach`] for what it drives and checks.
fn main() {
    afl::fuzz!(|data: &[u8]| iapeer_fuzz::attach(data));
}
