# Sourced by scripts/quickstart and scripts/test (from the checkout's root): picks the Python
# environment they install into, and puts it first on PATH, so that `python3`, `tuner` and
# `ruff` after it are that environment's.
#   - a virtual environment the user activated: that one;
#   - a python3 that allows installs (pyenv, conda, a container's): that one, as before;
#   - a python3 that refuses them (PEP 668: Debian's and Ubuntu's own): the project's virtual
#     environment .venv, made from it on first use.
# python_env            choose, making .venv if needed (installing python3-venv as root)
# python_env --no-create  the same, but without a .venv it only says to run the set-up first

PYTHON_ENV_DIR=.venv

# What kind of environment PYTHON (default: python3 on PATH) is: "venv", "open" (allows
# installs), "managed" (refuses them, PEP 668) or "old <version>". Asked of the interpreter, not
# of the shell's variables: VIRTUAL_ENV may be stale, and the marker file sits where that
# interpreter's standard library is, wherever that is.
python_env_kind() {
  "${1:-python3}" -c '
import os, sys, sysconfig
if sys.version_info < (3, 10):
    print("old", sys.version.split()[0])
elif sys.prefix != sys.base_prefix:
    print("venv")
elif os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")):
    print("managed")
else:
    print("open")
'
}

# Debian splits ensurepip (which venv needs) into python3-venv.
_python_env_venv_module() {
  python3 -c 'import ensurepip, venv' 2>/dev/null && return 0
  local package
  package="python3.$(python3 -c 'import sys; print(sys.version_info[1])')-venv"
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "python3 cannot make a virtual environment without $package: installing it (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
    python3 -c 'import ensurepip, venv' 2>/dev/null && return 0
  fi
  echo "error: python3 cannot make a virtual environment: install $package" \
    "(apt-get install $package), or activate a virtual environment of your own" >&2
  exit 1
}

python_env() {
  local kind venv
  if ! command -v python3 >/dev/null; then
    echo "error: no python3 on PATH: tuner needs Python >= 3.10 (Debian: apt-get install" \
      "python3 python3-venv)" >&2
    exit 1
  fi
  kind=$(python_env_kind)
  case "$kind" in
    old*)
      echo "error: python3 is Python ${kind#old }; tuner needs Python >= 3.10" >&2
      exit 1
      ;;
    venv | open) return 0 ;;
  esac
  venv="$PWD/$PYTHON_ENV_DIR"
  echo "python3 here refuses installs (PEP 668): using the project's virtual environment" \
    "$PYTHON_ENV_DIR (afterwards: $PYTHON_ENV_DIR/bin/tuner, or . $PYTHON_ENV_DIR/bin/activate)" >&2
  # A .venv whose python no longer runs (its base Python was upgraded or removed) is made anew.
  if ! "$venv/bin/python" -c '' 2>/dev/null; then
    if [ "${1:-}" = "--no-create" ]; then
      echo "error: no working $PYTHON_ENV_DIR yet: run ./scripts/test once without --fast" >&2
      exit 1
    fi
    _python_env_venv_module
    python3 -m venv --clear "$venv"
  fi
  # What bin/activate does, without its prompt and hooks (it is not written for `set -u`).
  export VIRTUAL_ENV="$venv"
  export PATH="$venv/bin:$PATH"
  unset PYTHONHOME
  hash -r
}
