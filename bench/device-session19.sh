#!/usr/bin/env bash
# Session 19's device runs: session 16's parts (bench/device-session16.sh's
# header lists them) with session 19's scratch paths.
TAG=s19 exec bash "$(dirname "$0")/device-session16.sh"
