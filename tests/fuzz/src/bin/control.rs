//! AFL++ target `control`: see [`iapeer_fuzz::control`] for what it drives and checks.
fn main() {
    afl::fuzz!(|data: &[u8]| iapeer_fuzz::control(data));
}
