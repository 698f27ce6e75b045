#!/bin/sh -
# SPDX-License-Identifier: MIT
#
# mesa-fork-check [--shim]: shows each of the fork's drivers in this prefix
# (an install, or an unpacked bundle) working. A driver whose GPU this
# machine has copies data on it with mesa-fork-vkcheck --verify; a driver
# without one runs mesa-fork-vkcheck on its drm-shim, a fake kernel driver
# shipped next to it (nothing executes there, so no data is checked).
# --shim uses the drm-shims even where a GPU is present. Every driver must
# report the prefix's release in driverInfo, or it was another driver.
# Exit status 0 when every driver came up, 1 when one did not, 2 on bad use.
#
# MESA_FORK_WRAPPER, when set, is a command (shell words, quoted as in sh)
# that runs the prefix's programs, e.g. "qemu-aarch64 -L /srv/arm64-root"
# to look at an arm64 bundle on another machine.
set -uf

case "${1:-}" in
  "") force_shim=0 ;;
  --shim) force_shim=1 ;;
  *) echo "usage: mesa-fork-check [--shim]" >&2; exit 2 ;;
esac

# This script's prefix, from its own path: no cd, so CDPATH, cd wrappers
# and hooks cannot change it.
here=$0
case $here in
  */*) here=${here%/*} ;;
  *) echo "mesa-fork-check: run it by its path or from PATH, not as 'sh mesa-fork-check'" >&2
     exit 2 ;;
esac
case $here in
  /*) ;;
  *) here=$PWD/$here ;;
esac
case $here in
  */bin) here=${here%/bin} ;;
  *) here=$here/.. ;;
esac
case $here in
  *[:\;]*) echo "mesa-fork-check: $here holds a ':' or ';', which separate entries of VK_DRIVER_FILES and LD_LIBRARY_PATH; move it" >&2
           exit 2 ;;
esac
share=$here/share/mesa-fork
vkcheck=$here/bin/mesa-fork-vkcheck
for f in "$share/release" "$share/shims" "$vkcheck"; do
  if [ ! -e "$f" ]; then
    echo "mesa-fork-check: $f is missing: $here is not a mesa-fork prefix or bundle" >&2
    exit 2
  fi
done
release=$(cat "$share/release")
# The wrapper's words, as sh would split and unquote them, become "$@".
eval "set -- ${MESA_FORK_WRAPPER:-}" || exit 2
# Only the drivers named here: no loader filter of the user's applies.
unset VK_LOADER_DRIVERS_SELECT VK_LOADER_DRIVERS_DISABLE VK_ADD_DRIVER_FILES

# The "info" field (driverInfo) of the first JSON line vkcheck --list prints.
info_of() {
  sed -n 's/.*"info": *"\([^"]*\)".*/\1/p' | head -n 1
}

status=0
checked=0
while read -r drv shimlib vars; do
  case "$drv" in ''|'#'*) continue ;; esac
  checked=$((checked + 1))
  icd=$share/icd.d/mesa_fork_${drv}_icd.json
  if [ ! -f "$icd" ]; then
    echo "$drv: FAILED: no $icd"
    status=1
    continue
  fi
  info=$(VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd "$@" "$vkcheck" --list </dev/null 2>/dev/null | info_of)
  if [ -n "$info" ] && [ "$force_shim" = 0 ]; then
    where="its GPU"
    out=$(VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd "$@" "$vkcheck" --verify </dev/null 2>&1)
    rc=$?
  else
    where="its drm-shim ($vars; nothing executes, the data is not checked)"
    # LD_PRELOAD splits at blanks and cannot quote: the shim is named by its
    # file name and found through LD_LIBRARY_PATH, so a prefix may hold spaces.
    lpath=$here/lib/mesa-fork/drm-shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    preload=$shimlib${LD_PRELOAD:+ $LD_PRELOAD}
    # $vars: VAR=value words of the shims file, split on purpose.
    # shellcheck disable=SC2086
    info=$(env VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd" LD_LIBRARY_PATH="$lpath" \
             LD_PRELOAD="$preload" $vars "$@" "$vkcheck" --list </dev/null 2>/dev/null | info_of)
    # shellcheck disable=SC2086
    out=$(env VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd" LD_LIBRARY_PATH="$lpath" \
            LD_PRELOAD="$preload" $vars "$@" "$vkcheck" </dev/null 2>&1)
    rc=$?
  fi
  case "$info" in
    *"($release)"*)
      if [ "$rc" = 0 ]; then
        echo "$drv: OK on $where: $info"
      else
        echo "$drv: FAILED on $where (mesa-fork-vkcheck exit $rc): $info"
        printf '%s\n' "$out" | sed 's/^/    /'
        status=1
      fi ;;
    "")
      echo "$drv: FAILED on $where: the Vulkan loader found no device with $icd"
      printf '%s\n' "$out" | sed 's/^/    /'
      status=1 ;;
    *)
      echo "$drv: FAILED on $where: driverInfo \"$info\" does not name ($release)"
      status=1 ;;
  esac
done < "$share/shims"
if [ "$checked" = 0 ]; then
  echo "mesa-fork-check: $share/shims names no driver" >&2
  exit 1
fi
exit "$status"
