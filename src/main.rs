//! The `iapeer` binary: everything lives in the library; see `iapeer::main` (`src/cli`).

/// A heap per thread (issue 31 item 3): with glibc's arenas, a session thread preempted while
/// it allocated held a lock the router and the acceptor then waited on in a burst.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(iapeer::main());
}
