#!/bin/sh
# Replays a captured output for a fake tool. Usage (from a tool wrapper): _replay.sh NAME "$@"
# In $HEALTH_FAKE_DIR: NAME.out -> stdout, NAME.err -> stderr, NAME.rc -> exit code, NAME.hang -> sleep that long.
# Every call is appended to $HEALTH_FAKE_DIR/calls.log ("NAME ARGS") so tests can check the exact argv.
name="$1"; shift
dir="${HEALTH_FAKE_DIR:?HEALTH_FAKE_DIR not set}"
printf '%s\n' "$name $*" >> "$dir/calls.log"
if [ -f "$dir/$name.hang" ]; then sleep "$(cat "$dir/$name.hang")"; fi
[ -f "$dir/$name.out" ] && cat "$dir/$name.out"
[ -f "$dir/$name.err" ] && cat "$dir/$name.err" >&2
if [ -f "$dir/$name.rc" ]; then exit "$(cat "$dir/$name.rc")"; fi
if [ -f "$dir/$name.out" ] || [ -f "$dir/$name.err" ]; then exit 0; fi
echo "fake $(basename "$0"): no replay for $name" >&2
exit 127
