# Sourced by scripts/test.sh and by the repository's scripts/package: makes sure `$venv`
# (default <repo>/target/python/venv, or HERDLESS_PY_VENV) exists with the pinned tools of
# requirements-dev.txt, reinstalled only when that file changes.
# Needs: $here (bindings-python), $root (the repository).
venv="${HERDLESS_PY_VENV:-$root/target/python/venv}"
if [ ! -x "$venv/bin/python" ]; then
  printf '\n== python binding: creating venv %s\n' "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
fi
_stamp="$venv/.requirements-dev.sha256"
_want="$(sha256sum "$here/requirements-dev.txt" | cut -d' ' -f1)"
if [ "$(cat "$_stamp" 2>/dev/null || true)" != "$_want" ]; then
  printf '\n== python binding: installing pinned dev tools\n'
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-dev.txt"
  echo "$_want" >"$_stamp"
fi
