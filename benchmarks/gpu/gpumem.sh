# GPU memory sampling shared by the GPU benchmarks (sourced, not run): nvidia-smi's used memory once a second
# into a file, and the peak of that file in MiB.
#
#   . "$(dirname "$0")/gpumem.sh"; gpumem_start "$OUT/gpumem.txt"; ...; gpumem_peak "$OUT/gpumem.txt"; gpumem_stop

gpumem_start() {
  # appended (O_APPEND), so that a caller may empty the file between runs without leaving a hole of NUL bytes
  : > "$1"
  ( while sleep 1; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; done >> "$1" ) &
  GPUMEM_PID=$!
}

gpumem_peak() {
  sort -n "$1" | tail -1
}

gpumem_stop() {
  kill "$GPUMEM_PID" 2>/dev/null
}
