#!/usr/bin/env bash
# Install iapeer for this user (spec 08 §1): the binary in $IAPEER_BIN_DIR (default
# ~/.local/bin), keeping the previous one as iapeer.prev, each with the debug file it names
# (iapeer-<id>.debug, from scripts/release.sh: file and line in backtraces); the man page where `man iapeer`
# finds it; completions for bash, zsh and fish; then `iapeer install` (root, docs, service
# file — nothing is started).
#
#   scripts/install.sh                                  # builds with scripts/release.sh
#   IAPEER_INSTALL_FROM=target/debug/iapeer scripts/install.sh   # installs that binary
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${HOME:-}" ]]; then
    echo "install.sh: HOME is not set; set it to your home folder and run again" >&2
    exit 1
fi

src="${IAPEER_INSTALL_FROM:-}"
if [[ -z "$src" ]]; then
    echo "== scripts/release.sh (cargo build --release, then the debug info beside the binary)"
    scripts/release.sh
    src="${CARGO_TARGET_DIR:-target}/release/iapeer"
fi
if [[ ! -x "$src" ]]; then
    echo "install.sh: $src is not an executable file; build it or point IAPEER_INSTALL_FROM at one" >&2
    exit 1
fi

bin_dir="${IAPEER_BIN_DIR:-$HOME/.local/bin}"
data="${XDG_DATA_HOME:-$HOME/.local/share}"
config="${XDG_CONFIG_HOME:-$HOME/.config}"
dest="$bin_dir/iapeer"

# Write stdin to <target> atomically: a temp name in the target folder, then rename.
put() { # put <target> <mode>  (content on stdin)
    local target="$1" mode="$2" tmp
    mkdir -p "$(dirname "$target")"
    tmp="$(dirname "$target")/.$(basename "$target").tmp-$$"
    cat >"$tmp"
    chmod "$mode" "$tmp"
    mv -f "$tmp" "$target"
}

# The debug file a binary names in its .gnu_debuglink section (empty: none).
debuglink() {
    readelf -p .gnu_debuglink "$1" 2>/dev/null | sed -n 's/^ *\[ *0\] *//p' || true
}
if ! command -v readelf >/dev/null 2>&1 && [[ "$(uname -s)" == Linux ]]; then
    echo "install.sh: readelf is missing; install binutils (Debian/Ubuntu: sudo apt install binutils) and run again" >&2
    exit 1
fi

mkdir -p "$bin_dir"
# The debug file first, under its own name, so that iapeer never names a file that is not there.
debug_name="$(debuglink "$src")"
if [[ -n "$debug_name" ]]; then
    src_debug="$(dirname "$src")/$debug_name"
    if [[ "$debug_name" == */* || ! -f "$src_debug" ]]; then
        echo "install.sh: $src keeps its debug info (file and line in backtraces) in $src_debug, which cannot be read: put that file beside the binary, or make both again with scripts/release.sh" >&2
        exit 1
    fi
    [[ -e "$bin_dir/$debug_name" ]] || put "$bin_dir/$debug_name" 644 <"$src_debug"
fi
if [[ -e "$dest" ]]; then
    if cmp -s "$src" "$dest"; then
        echo "binary: $dest (unchanged)"
    else
        # Keep one level of rollback: a hard link (or copy) of the current binary.
        ln -f "$dest" "$bin_dir/iapeer.prev" 2>/dev/null || cp -f "$dest" "$bin_dir/iapeer.prev"
        put "$dest" 755 <"$src"
        echo "binary: $dest (replaced; the previous one is $bin_dir/iapeer.prev)"
    fi
else
    put "$dest" 755 <"$src"
    echo "binary: $dest (installed)"
fi
# Debug files neither iapeer nor iapeer.prev names (older builds').
keep_debug=" $(debuglink "$dest") "
if [[ -e "$bin_dir/iapeer.prev" ]]; then
    keep_debug+="$(debuglink "$bin_dir/iapeer.prev") "
fi
for f in "$bin_dir"/iapeer-*.debug; do
    if [[ -e "$f" && "$keep_debug" != *" $(basename "$f") "* ]]; then
        rm -f "$f"
    fi
done
if [[ -n "$debug_name" ]]; then
    echo "debug info: $bin_dir/$debug_name (file and line in backtraces)"
fi

"$dest" --generate man | put "$data/man/man1/iapeer.1" 644
echo "man page: $data/man/man1/iapeer.1"
"$dest" --generate completions-bash | put "$data/bash-completion/completions/iapeer" 644
"$dest" --generate completions-zsh | put "$data/zsh/site-functions/_iapeer" 644
"$dest" --generate completions-fish | put "$config/fish/completions/iapeer.fish" 644
echo "completions: bash, zsh, fish"
if [[ "${SHELL:-}" == */zsh ]]; then
    echo "note: zsh loads $data/zsh/site-functions/_iapeer once that folder is in fpath (before compinit)"
fi

if [[ "${SHELL:-}" != */zsh && "${SHELL:-}" != */fish ]] \
    && [[ ! -r /usr/share/bash-completion/bash_completion && ! -r /etc/bash_completion \
          && ! -r /opt/homebrew/etc/profile.d/bash_completion.sh && ! -r /usr/local/etc/profile.d/bash_completion.sh ]]; then
    echo "note: bash completion needs the bash-completion package (Debian/Ubuntu: sudo apt install bash-completion; macOS: brew install bash-completion@2)"
fi

case ":$PATH:" in
    *":$bin_dir:"*) ;;
    *)
        # The exact line for the user's shell (issue 30 item 6): `iapeer` is not found until it
        # is run, so say also how to reach it before then.
        case "${SHELL:-}" in
            */zsh) line="echo 'export PATH=\"$bin_dir:\$PATH\"' >> ~/.zshrc" ;;
            */fish) line="fish_add_path $bin_dir" ;;
            *) line="echo 'export PATH=\"$bin_dir:\$PATH\"' >> ~/.bashrc" ;;
        esac
        echo "note: $bin_dir is not on your PATH, so \`iapeer\` and \`man iapeer\` are not found yet. Add it with:"
        echo "    $line"
        echo "  and open a new shell; until then run it as $dest (e.g. $dest onboard)"
        ;;
esac

"$dest" install
