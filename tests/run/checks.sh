# What the end-to-end scripts of tests/run share, sourced by each: pass
# and fail lines with a failure count, and a check that a case left
# nothing new in /dev/shm (taken against the listing when this is sourced).
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
shm_before=$(ls /dev/shm | sort)
shm_clean() {
    if [ "$(ls /dev/shm | sort)" == "$shm_before" ]; then pass "$1: /dev/shm clean"
    else fail "$1: /dev/shm has new entries: $(comm -13 <(echo "$shm_before") <(ls /dev/shm | sort) | tr '\n' ' ')"; fi
}
