# Sourced by the install scripts of the side venvs (install_appworld.sh, install_openenv.sh), after their
# installed_ok check: creates $VENV with $PYTHON if it is missing, and defines `pip_step LOG ARGS...`, which runs
# `pip ARGS` in $VENV with pip's whole output in LOG and, on the terminal, scripts/pip_progress.py's lines (as in
# scripts/install.sh: big files with their sizes, a line every 10 s, the totals). Needs VENV, PYTHON and LABEL.
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[$LABEL] creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi
LOGS="$VENV/install-logs"
mkdir -p "$LOGS"
pip_step() {
  local log="$1"; shift
  "$VENV/bin/python" -m pip "$@" --progress-bar off 2>&1 | "$VENV/bin/python" scripts/pip_progress.py "$log" "$LABEL" \
    || { echo "[$LABEL] pip failed; the end of $log:" >&2; tail -n 30 "$log" >&2; return 1; }
}
