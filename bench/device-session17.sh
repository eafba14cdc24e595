#!/usr/bin/env bash
# Session 17's device runs: session 16's parts (see its header for PARTS and
# the knobs), with session 17's scratch paths.
TAG=s17 exec bash "$(dirname "$0")/device-session16.sh" "$@"
