#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# install-vendor.sh SRCDIR DASHBOARDDIR: copies the terminal emulator (xterm.js and its fit addon, as npm ci
# put them in SRCDIR/node_modules) into the installed dashboard's vendor/xterm/. Run by meson install.
set -eu
src=$1
dest=${MESON_INSTALL_DESTDIR_PREFIX%"${MESON_INSTALL_PREFIX:-}"}$2/vendor/xterm
nm=$src/node_modules/@xterm
# Without them the rest of the dashboard works and its terminal says what is missing; the fleet's install
# does not fail over it (tests/integration/test_dashboard.py does).
for f in xterm/lib/xterm.mjs xterm/css/xterm.css xterm/LICENSE addon-fit/lib/addon-fit.mjs; do
        if [ ! -f "$nm/$f" ]; then
                echo "install-vendor.sh: warning: $nm/$f is missing, the dashboard's terminal will not work:" \
                        "run 'npm ci' in $src (scripts/test and scripts/up do)" >&2
                exit 0
        fi
done
mkdir -p "$dest"
install -m 0644 "$nm/xterm/lib/xterm.mjs" "$nm/xterm/css/xterm.css" "$nm/addon-fit/lib/addon-fit.mjs" "$dest/"
install -m 0644 "$nm/xterm/LICENSE" "$dest/LICENSE.txt"
