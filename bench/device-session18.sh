#!/usr/bin/env bash
# Session 18's device runs: session 16's parts (bench/device-session16.sh's
# header lists them) with session 18's scratch paths.
TAG=s18 exec bash "$(dirname "$0")/device-session16.sh"
