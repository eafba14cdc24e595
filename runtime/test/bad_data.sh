#!/usr/bin/env bash
# Bad data for a generated executable: one message naming the file and exit 1,
# with or without a GPU (trainMain opens and checks its data, flags and
# --log-json file before it looks for the GPU). Corrupt image files are only
# found when decoded (test/e2e/test_train_data.py covers them on the CPU path;
# cnnrt_host_tests on the loader).
# usage: bad_data.sh MODEL_EXECUTABLE (3x32x32 input, 10 classes)
set -u
exe=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
expect() { # expect "MESSAGE" ARGS...: exit 1 and exactly the one line
  local want=$1
  shift
  local out rc
  out=$("$exe" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne 1 ] || [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ] ||
     [ "$out" != "$want" ]; then
    echo "FAIL: $* -> exit $rc:"
    echo "$out"
    echo "expected: $want"
    fails=1
  else
    echo "ok: $out"
  fi
}
expect "cnnrt: cannot open dataset $dir/none: No such file or directory" \
  --data "$dir/none"
mkdir "$dir/empty"
expect "cnnrt: cannot tell the format of dataset directory $dir/empty: expected data_batch_*.bin/test_batch.bin (CIFAR-10), train_x.npy/train_y.npy (npy), class folders (ImageFolder), or images/ and masks/ (SegFolder)" \
  --data "$dir/empty"
mkdir -p "$dir/folder/a"
expect "cnnrt: no .jpg/.jpeg/.png images in class folder $dir/folder/a" \
  --data "$dir/folder"
# A .npy whose labels are one short, and one with a label out of range
# (written byte by byte: 4 images of 3x2x2 uint8, int64 labels).
npy() { # npy FILE DESCR SHAPE DATA_HEX
  local h="{'descr': '$2', 'fortran_order': False, 'shape': ($3), }"
  while [ $(( (10 + ${#h} + 1) % 64 )) -ne 0 ]; do h="$h "; done
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $(( (${#h} + 1) % 256 )))\\x00"
    printf '%s\n' "$h"; printf "$4"; } >"$1"
}
npy "$dir/x.npy" '|u1' '4, 3, 2, 2' "$(printf '\\x01%.0s' $(seq 48))"
npy "$dir/y3.npy" '<i8' '3,' "$(printf '\\x00%.0s' $(seq 24))"
npy "$dir/y4.npy" '<i8' '4,' "$(printf '\\x00%.0s' $(seq 32))"
npy "$dir/ybad.npy" '<i8' '4,' "$(printf '\\x00%.0s' $(seq 16))\\x0c$(printf '\\x00%.0s' $(seq 15))"
expect "cnnrt: labels $dir/y3.npy have 3 entries but $dir/x.npy has 4 images (expected a 1-D array of one label per image)" \
  --data "$dir/x.npy" --labels "$dir/y3.npy"
expect "cnnrt: bad label 12 in $dir/ybad.npy index 2 (num_classes = 10)" \
  --data "$dir/x.npy" --labels "$dir/ybad.npy"
expect "cnnrt: the images $dir/x.npy need their labels: pass --labels labels.npy" \
  --data "$dir/x.npy"
expect "cnnrt: give --steps or --epochs, not both (see --help)" \
  --data synthetic --steps 3 --epochs 1
expect "cnnrt: invalid value 'cosin' for --lr-schedule (expected constant, step or cosine) (see --help)" \
  --data synthetic --lr-schedule cosin
expect "cnnrt: no validation split for the single array $dir/x.npy (use a directory with train_x.npy, train_y.npy, val_x.npy, val_y.npy)" \
  --data "$dir/x.npy" --labels "$dir/y4.npy" --eval
exit $fails
