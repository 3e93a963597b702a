#!/usr/bin/env bash
# Fill the VM cache (.cache/vm/ of the checkout, or $EXECBOX_VM_CACHE):
# Debian's generic kernel (linux-image-6.1.0-*-amd64: the -cloud- flavour has
# no 9p) and busybox-static, fetched with `apt-get download` and unpacked
# there (nothing is installed on the host: busybox-static would replace the
# busybox package), and an initramfs of busybox, scripts/vm/init and the
# modules that mount the host's root (virtio-pci, 9p, overlay).
# Idempotent: a second run downloads and builds nothing; a changed init
# rebuilds the initramfs from the cached packages.
# Prints nothing on success but what it did.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${EXECBOX_VM_CACHE:-$(cd "$HERE/../.." && pwd)/.cache/vm}
MODULES=(virtio_pci 9pnet_virtio 9p overlay)

say() { printf 'vm build: %s\n' "$*" >&2; }

mkdir -p "$CACHE/debs"
cd "$CACHE"

# The kernel package: the one cached, else the one linux-image-amd64 depends on.
kernel_deb() { find debs -name 'linux-image-6.1.0-*-amd64_*.deb' ! -name '*-cloud-*' | sort -V | tail -1; }
busybox_deb() { find debs -name 'busybox-static_*.deb' | sort -V | tail -1; }

download() {
    say "downloading $* into $CACHE/debs"
    # apt's download sandbox user cannot write a root-owned folder: say so
    # plainly instead of a warning per package.
    (cd debs && apt-get download -q -o APT::Sandbox::User="$(id -un)" "$@" >/dev/null)
}

if [ -z "$(kernel_deb)" ]; then
    name=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-6\.1\.0-[0-9]*-amd64\)$/\1/p' | head -1)
    if [ -z "$name" ] && [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        name=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-6\.1\.0-[0-9]*-amd64\)$/\1/p' | head -1)
    fi
    [ -n "$name" ] || { say "apt-cache knows no linux-image-6.1.0-*-amd64 (apt-get update?)"; exit 1; }
    download "$name"
fi
[ -n "$(busybox_deb)" ] || download busybox-static

kdeb=$(kernel_deb)
bdeb=$(busybox_deb)
version=$(basename "$kdeb" | sed 's/^linux-image-\(6\.1\.0-[0-9]*-amd64\)_.*/\1/')
stamp="$(basename "$kdeb") $(basename "$bdeb") $(sha256sum "$HERE/init" | cut -c1-16)"
if [ -f vmlinuz ] && [ -f initramfs.cpio.gz ] && [ "$(cat built 2>/dev/null)" = "$stamp" ]; then
    exit 0
fi

say "building the initramfs for $version"
work=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$kdeb" "$work/kernel"
dpkg-deb -x "$bdeb" "$work/busybox"
busybox="$work/busybox/bin/busybox"
"$busybox" depmod -b "$work/kernel" "$version"

# The modules asked for and everything they depend on (modules.dep's paths
# are relative to the version's folder).
root="$work/initramfs"
moddir="lib/modules/$version"
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/$moddir"
for module in "${MODULES[@]}"; do
    line=$(grep -E "(^|/)$module\.ko:" "$work/kernel/$moddir/modules.dep") \
        || { say "$version has no module $module"; exit 1; }
    for file in ${line/:/}; do
        mkdir -p "$root/$moddir/$(dirname "$file")"
        cp "$work/kernel/$moddir/$file" "$root/$moddir/$file"
    done
done
cp "$work/kernel/$moddir/modules.order" "$work/kernel/$moddir/modules.builtin" "$root/$moddir/"
"$busybox" depmod -b "$root" "$version"
cp "$busybox" "$root/bin/busybox"
cp "$HERE/init" "$root/init"
chmod 0755 "$root/init" "$root/bin/busybox"
(cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initramfs.cpio.gz")

cp "$work/kernel/boot/vmlinuz-$version" "$work/vmlinuz"
mv "$work/vmlinuz" vmlinuz
mv "$work/initramfs.cpio.gz" initramfs.cpio.gz
echo "$stamp" >built
say "ready: $CACHE/vmlinuz, $CACHE/initramfs.cpio.gz ($(du -h initramfs.cpio.gz | cut -f1))"
