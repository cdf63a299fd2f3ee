# What the end-to-end scripts of tests/run share, sourced by each: pass
# and fail lines with a failure count, and a check that a case left
# nothing new in /dev/shm (taken against the listing when this is sourced).
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
shm_before=$(ls /dev/shm | sort)
# Only entries that were not there before count: ctest runs other tests
# beside this one, and an entry of theirs that goes away is no fault of
# this case. An entry that goes away within a second (a killed process's
# segment that UCX unlinks as its peers detach) is not left behind either,
# so the listing is taken again before it fails.
shm_new() { comm -13 <(echo "$shm_before") <(ls /dev/shm | sort) | tr '\n' ' '; }
shm_clean() {
    local new tries=0
    new=$(shm_new)
    while [ -n "$new" ] && [ $tries -lt 10 ]; do
        sleep 0.1; tries=$((tries + 1)); new=$(shm_new)
    done
    if [ -z "$new" ]; then pass "$1: /dev/shm clean"
    else fail "$1: /dev/shm has new entries: $new"; fi
}
