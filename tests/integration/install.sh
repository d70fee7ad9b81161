#!/bin/bash
# `meson install` gives an embedder what it needs and nothing from the build tree:
# the examples, compiled out of tree against the installed headers, archive and
# pkg-config file alone, copy real images (a sparse one with holes, data and a tail;
# one over NBD through the installed `sluice serve`), verified with cmp. A header the
# public API reaches but the install left out fails the compile here.
. "$(dirname "$0")/functions.sh"
requires pkg-config

root=$scratch/root
meson install -C "$BUILD_ROOT" --no-rebuild --quiet --destdir "$root" >"$scratch/install.log" 2>&1 ||
  fail "meson install failed: $(cat "$scratch/install.log")"
prefix=$(find "$root" -name sluice-cpp.pc -path '*/pkgconfig/*' | head -n1)
[[ -n $prefix ]] || fail "no sluice-cpp.pc was installed: $(find "$root" -type f | head -n 20)"
pc_dir=$(dirname "$prefix")
# The .pc file names the configured prefix; the files are under the destdir.
configured=$(PKG_CONFIG_PATH=$pc_dir pkg-config --variable=prefix sluice-cpp)
pc() { PKG_CONFIG_PATH=$pc_dir pkg-config --define-variable=prefix="$root$configured" "$@" sluice-cpp; }
[[ -x $root$configured/bin/sluice ]] || fail "no sluice binary under $root$configured/bin"
expect_ok "$root$configured/bin/sluice" --version

# What was compiled into the archive (a sanitizer build) the examples must be too.
read -r -a cxx <<<"${CXX_COMMAND:-c++}"
extra=()
[[ ${SANITIZE:-none} == none ]] || extra+=("-fsanitize=$SANITIZE")
for example in embed_copy blocking_copy receive_image; do
  log "building $example against the installed files"
  # shellcheck disable=SC2046  # pkg-config output is a list of words by design
  "${cxx[@]}" -std=c++20 -Wall -Wextra -Werror "${extra[@]}" -o "$scratch/$example" \
    "$SOURCE_ROOT/apps/examples/$example.cpp" $(pc --cflags --libs) 2>"$scratch/$example.log" ||
    fail "$example does not build against the installed files: $(head -n 20 "$scratch/$example.log")"
done

log "the out-of-tree examples copy a sparse image"
sparse_file "$scratch/src.img" 40M
write_random "$scratch/src.img" 1M 3M
write_random "$scratch/src.img" 20M 1M
printf 'tail' >>"$scratch/src.img"
expect_ok "$scratch/embed_copy" "$scratch/src.img" "$scratch/embed.img"
same_content "$scratch/src.img" "$scratch/embed.img"
expect_ok "$scratch/blocking_copy" "$scratch/src.img" "$scratch/blocking.img"
same_content "$scratch/src.img" "$scratch/blocking.img"

log "and over NBD, to the installed sluice serve"
truncate -s "$(size_of "$scratch/src.img")" "$scratch/export.img"
"$root$configured/bin/sluice" serve --protocol nbd --listen "unix://$scratch/nbd.sock" \
  --export disk="$scratch/export.img" 2>"$scratch/serve.log" &
server=$!
on_exit "kill $server 2>/dev/null"
for _ in $(seq 1 100); do [[ -S $scratch/nbd.sock ]] && break; sleep 0.05; done
[[ -S $scratch/nbd.sock ]] || fail "the installed sluice serve did not start: $(cat "$scratch/serve.log")"
expect_ok "$scratch/blocking_copy" "$scratch/src.img" "nbd+unix:///disk?socket=$scratch/nbd.sock"
expect_ok "$scratch/embed_copy" "nbd+unix:///disk?socket=$scratch/nbd.sock" "$scratch/back.img"
same_content "$scratch/src.img" "$scratch/back.img"
kill "$server"
wait "$server" || fail "sluice serve did not exit 0 on SIGTERM: $(cat "$scratch/serve.log")"
same_content "$scratch/src.img" "$scratch/export.img"

log "and the installed receive_image takes a Chunked image from the installed sluice"
"$scratch/receive_image" "unix://$scratch/recv.sock" "$scratch/received.img" "$(size_of "$scratch/src.img")" \
  >"$scratch/recv.uri" 2>"$scratch/recv.log" &
receiver=$!
on_exit "kill $receiver 2>/dev/null"
for _ in $(seq 1 100); do [[ -s $scratch/recv.uri ]] && break; sleep 0.05; done
[[ $(cat "$scratch/recv.uri") == "unix://$scratch/recv.sock" ]] ||
  fail "receive_image did not say where it listens: $(cat "$scratch/recv.log")"
expect_ok "$root$configured/bin/sluice" copy "$scratch/src.img" "unix://$scratch/recv.sock"
wait "$receiver" || fail "receive_image failed: $(cat "$scratch/recv.log")"
same_content "$scratch/src.img" "$scratch/received.img"
log "ok"
