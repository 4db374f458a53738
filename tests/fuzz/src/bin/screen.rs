//! AFL++ target `screen`: see [`iapeer_fuzz::screen`] for what it drives and checks.
fn main() {
    afl::fuzz!(|data: &[u8]| iapeer_fuzz::screen(data));
}
