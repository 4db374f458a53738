//! The `iapeer` binary: everything lives in the library; see `iapeer::main` (`src/cli`).

fn main() {
    std::process::exit(iapeer::main());
}
