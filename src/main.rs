//! The `iapeer` binary: everything lives in the library; see `iapeer::cli`.

fn main() {
    std::process::exit(iapeer::cli::main());
}
