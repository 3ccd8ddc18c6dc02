#!/usr/bin/env bash
# What the lead runs on the GPU machine (device tool) with build/ carried:
#   tools/device_run.sh [tests] [shards] [pyext] [latency] [attention-ab] [examples] [memory] [conv] ...
# MEMORY_ARGS=--variants adds the schedule variants to the memory step. Results land in $OUT.
# Each step is bounded in time so one hang cannot eat the lease.
set -u
cd "$(dirname "$0")/.."
# B: the build directory to use (default build/). The tests find the source tree from their own
# location (tests/test_paths.hpp), so a carried build needs no link to the path it was built at.
B=${B:-build}
OUT=${OUT:-/tmp/out}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "git $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
for step in "$@"; do
  echo "=== $step ($(date +%T))"
  case $step in
    tests) timeout 300 $B/kiln_gpu_tests --gtest_brief=1 --gtest_filter='-*Tma*' 2>&1 |
             tee "$OUT/gpu_tests.log" | tail -40
           # the TMA kernels apart, under a short limit: a wrong transaction count hangs
           # (90 variants since the im2col form, twice as many as before)
           timeout 180 $B/kiln_gpu_tests --gtest_brief=1 --gtest_filter='*Tma*' 2>&1 |
             tee "$OUT/gpu_tests_tma.log" | tail -12; echo "tma tests: exit ${PIPESTATUS[0]}"
           # the CLI's GPU paths (--device auto picks the GPU here): files in, files out
           timeout 120 $B/kiln_tests --gtest_brief=1 --gtest_filter='Cli.*' 2>&1 | tail -6 ;;
    examples)
      for spec in "add_layernorm_gelu rows=4097" "resnet50_bottleneck N=2" "transformer_mlp seq=77" \
                  "unet_resblock N=2"; do
        set -- $spec
        timeout 120 $B/kiln run "examples/graphs/$1.json" --shape "$2" --device gpu --check 2>&1 | tail -8
      done ;;
    memory) timeout ${MEMORY_TIMEOUT:-240} python3 bench/bench_memory.py --kiln $B/kiln ${MEMORY_ARGS:-} 2>&1 | tail -40 ;;
    conv) timeout ${CONV_TIMEOUT:-300} python3 bench/bench_conv.py --bin $B/bench_contraction --kiln $B/kiln --no-mma-baseline \
            ${CONV_ARGS:-} 2>&1 | tail -40 ;;  # CONV_ARGS=--autotune: the tuned config per layer too
    compile)  # cold NVRTC time per kernel (fresh cache dir), then a second process: 0 compiles
      rm -rf /tmp/kc-cold
      for g in add_layernorm_gelu resnet50_bottleneck transformer_mlp unet_resblock; do
        KILN_CACHE_DIR=/tmp/kc-cold timeout 120 $B/kiln emit "examples/graphs/$g.json" --out /tmp/emit-$g --compile
      done
      for i in 1 2; do
        KILN_CACHE_DIR=/tmp/kc-proc timeout 60 $B/kiln run examples/graphs/resnet50_bottleneck.json \
          --shape N=8 --device gpu --stats 2>&1 | grep -iE "time|nvrtc|compile|cache"
      done ;;
    host) timeout 120 $B/bench_host_overhead > "$OUT/host_overhead.log" 2>&1
          grep -vE "^ +[0-9]+ " "$OUT/host_overhead.log" | tail -20 ;;
    spec)  # shape-specialized vs generic kernels (EngineOptions::specialize_after swaps these in)
      for spec in "resnet50_bottleneck N=8" "resnet50_bottleneck N=32" "transformer_mlp seq=77" \
                  "transformer_mlp seq=512" "add_layernorm_gelu rows=4097"; do
        set -- $spec
        timeout 60 $B/kiln bench "examples/graphs/$1.json" --shape "$2" --specialize 2>&1 |
          grep -E "^graph|whole graph"
      done ;;
    graphs) timeout 120 $B/bench_cuda_graph examples/graphs/resnet50_bottleneck.json 2>&1 | tail -15 ;;
    embed) timeout 180 $B/kiln_tests --gtest_filter='EmbedInstall*:CApi*' 2>&1 | tail -15 ;;
    memcheck)  # the whole GPU suite under memcheck (SANITIZE_FILTER narrows it); racecheck is too slow
               # for one process: the racecheck step shards it
      timeout "${SANITIZE_TIMEOUT:-280}" compute-sanitizer --tool memcheck --print-limit 20 \
        $B/kiln_gpu_tests --gtest_brief=1 --gtest_filter="${SANITIZE_FILTER:-*}" \
        > "$OUT/memcheck.log" 2>&1
      echo "memcheck: exit $?"
      grep -aE "ERROR SUMMARY|PASSED|FAILED|Invalid" "$OUT/memcheck.log" | head -20 ;;
    racecheck)  # the whole GPU suite under racecheck, in SHARDS gtest shards side by side (the 66-size
                # loops thinned by GPU_TEST_SIZE_STEP, default 9: the same kernels, 10 sizes)
      export GPU_TEST_SIZE_STEP=${GPU_TEST_SIZE_STEP:-9}
      n=${SHARDS:-8}
      for ((i = 0; i < n; ++i)); do
        GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "${SANITIZE_TIMEOUT:-280}" \
          compute-sanitizer --tool racecheck --print-limit 20 \
          $B/kiln_gpu_tests > "$OUT/racecheck_$i.log" 2>&1 &
      done
      wait
      for ((i = 0; i < n; ++i)); do
        echo "shard $i: $(grep -ac '^\[       OK \]' "$OUT/racecheck_$i.log") ok," \
          "$(grep -ac '^\[  FAILED  \]' "$OUT/racecheck_$i.log") failed;" \
          "$(grep -aE 'RACECHECK SUMMARY|tests ran|PASSED' "$OUT/racecheck_$i.log" | tr '\n' ' ')"
      done ;;
    ops-variants)  # the op harness under schedule overrides (KILN_SCHEDULE), four settings side by side
      j=1
      for v in "pointwise.vecs=8,pointwise.threads=128,rownorm.threads=512,channelnorm.cb=40" \
               "pointwise.vecs=2,pointwise.threads=512,rownorm.threads=256,channelnorm.cb=40,channelnorm.cluster=4" \
               "pointwise.vecs=1,rownorm.threads=1024,channelnorm.cluster=4,channelnorm.slice_kb=160" \
               "pointwise.threads=512,rownorm.threads=64,channelnorm.cb=160,channelnorm.slice_kb=200"; do
        KILN_SCHEDULE="$v" timeout 235 $B/kiln_gpu_tests --gtest_brief=1 --gtest_filter='All/OpsGpu.*' \
          > "$OUT/ops_variant_$j.log" 2>&1 &
        j=$((j + 1))
      done
      wait
      for ((j = 1; j <= 4; ++j)); do
        echo "ops variant $j: $(grep -aE 'PASSED|FAILED' "$OUT/ops_variant_$j.log" | tr '\n' ' ')"
      done ;;
    profile)  # Nsight Compute on one conv layer and the groupnorm case (clocks left alone, METHOD.md)
      ncu_opts="--clock-control none --launch-skip 25 --launch-count 1 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --section Occupancy --section LaunchStats"
      # PROFILE_CONFIG=--config=wg128x128x64_s5_ws profiles that tile instead of the rules' one.
      timeout 150 ncu $ncu_opts --page details $B/bench_contraction conv 32 128 128 28 28 3 1 1 \
        ${PROFILE_CONFIG:-} > "$OUT/ncu_conv_res3.txt" 2>&1
      echo "ncu conv res3: exit $?"; grep -aE "Duration|Throughput|Pipe|Warp Cycles|Stall|Achieved Occ|Registers|Eligible|Issued" \
        "$OUT/ncu_conv_res3.txt" | head -40
      python3 -c "import sys; sys.path.insert(0, 'bench'); import bench_memory as b, json; \
json.dump(b.make_cases()['groupnorm_silu']['graph'], open('/tmp/gn.json', 'w'))"
      timeout 150 ncu $ncu_opts -k regex:channelnorm --page details $B/kiln bench /tmp/gn.json \
        --iters 5 --warmup 2 > "$OUT/ncu_groupnorm.txt" 2>&1
      echo "ncu groupnorm: exit $?"; grep -aE "Duration|Throughput|Warp Cycles|Stall|Achieved Occ" \
        "$OUT/ncu_groupnorm.txt" | head -20 ;;
    coldstart)  # a second process on a warm disk cache: CUDA start-up vs kiln's part
      rm -rf /tmp/kc-2p
      for i in 1 2 3; do
        for spec in "resnet50_bottleneck N=8" "transformer_mlp seq=77"; do
          set -- $spec
          KILN_CACHE_DIR=/tmp/kc-2p timeout 60 $B/kiln run "examples/graphs/$1.json" --shape "$2" \
            --device gpu --stats 2>&1 | grep -E "^time|^stats"
        done
      done ;;
    onnx)  # whole networks: torchvision/PyTorch -> ONNX -> kiln import -> kiln on the GPU vs PyTorch
      timeout 200 python3 tools/export_torchvision.py --out /tmp/m --batch 2 2>&1 | tail -5
      for m in resnet50 encoder unet_down; do
        [ -f /tmp/m/$m.onnx ] || continue
        timeout 60 $B/kiln import /tmp/m/$m.onnx --out /tmp/m/kiln 2>&1 | tail -2
        timeout 200 $B/kiln run /tmp/m/kiln/$m.json --device gpu --stats \
          --inputs /tmp/m/$m.inputs.safetensors --output /tmp/m/$m.got.safetensors 2>&1 | tail -4
        python3 tools/export_torchvision.py --compare /tmp/m/$m.expected.safetensors \
          /tmp/m/$m.got.safetensors --tol 1e-3 2>&1 | tail -3
      done ;;
    models)  # the encoder stack and the UNet down block vs PyTorch eager (+ CUDA graph), f16
      timeout ${MODELS_TIMEOUT:-300} python3 bench/bench_models.py --kiln $B/kiln --out "$OUT" \
        ${MODELS_ARGS:-} 2>&1 | tee "$OUT/bench_models.log" | tail -30 ;;
    zoo)  # the model zoo (bench/bench_zoo.py --list): ZOO_ARGS picks the part (--shard 2/5, --models a,b,
          # --skip-compile, ...); JSON lines in $OUT/zoo.jsonl (+ .md), kept as each model ends. The
          # soft budget (ZOO_BUDGET) ends the run with its table before the timeout would.
      timeout ${ZOO_TIMEOUT:-560} python3 bench/bench_zoo.py --kiln $B/kiln --out "$OUT/zoo.jsonl" \
        --budget-s ${ZOO_BUDGET:-500} ${ZOO_ARGS:-} > "$OUT/bench_zoo.log" 2>&1
      echo "bench_zoo: exit $?"; grep -E "^\[|^===|not started" "$OUT/bench_zoo.log" | tail -60
      cat "$OUT/zoo.jsonl.md" 2>/dev/null ;;
    resnet50)  # the whole ResNet-50 (ONNX -> kiln f16 NHWC, +/- CUDA graph) vs PyTorch eager, eager + CUDA
               # graph and torch.compile at N=1,32,128; time to first result; kiln vs torch outputs.
               # RESNET50_ARGS adds options (--no-compile, --batches 1,32, ...); JSON + plot land in $OUT.
      timeout ${RESNET50_TIMEOUT:-480} python3 bench/bench_resnet50.py --kiln $B/kiln --out "$OUT" \
        ${RESNET50_ARGS:-} 2>&1 | tee "$OUT/bench_resnet50.log" | tail -75 ;;
    devices)  # issue 23 on one GPU: kiln devices, the device/context tests, --device gpu:N
      $B/kiln devices
      timeout 120 $B/kiln_gpu_tests --gtest_brief=1 --gtest_filter='DevicesGpu.*:ThreadsGpu.*' 2>&1 |
        tail -15
      timeout 60 $B/kiln run examples/graphs/add_layernorm_gelu.json --shape rows=8 --device gpu:0 |
        tail -3 ;;
    multigpu)  # the two-GPU run (a 2-GPU machine): ResNet-50 N=128 on gpu:0 + gpu:1
      timeout ${MULTIGPU_TIMEOUT:-420} tools/multi_gpu_run.sh 2>&1 | tee "$OUT/multi_gpu.log" | tail -30 ;;
    shards)  # the GPU suite in 8 gtest shards side by side (GPU_TEST_SIZE_STEP=9) and each wgmma
             # attention schedule in a process of its own (SHARDS_TIMEOUT, default 200 s)
      for ((i = 0; i < 8; ++i)); do
        GPU_TEST_SIZE_STEP=9 GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout ${SHARDS_TIMEOUT:-200} \
          $B/kiln_gpu_tests --gtest_brief=1 --gtest_filter='-*WgmmaAndMmaSync*' > "$OUT/gpu_$i.log" 2>&1 &
      done
      for p in rule pingpong mma_sync; do
        timeout ${SHARDS_TIMEOUT:-200} $B/kiln_gpu_tests --gtest_brief=1 \
          --gtest_filter="*WgmmaAndMmaSync.Kernels/$p" > "$OUT/gpu_attn_$p.log" 2>&1 &
      done
      wait
      # --gtest_brief prints failures and the summary only: a log without its "... ran." line
      # was cut off by the limit (its output, buffered, is lost with it)
      for f in "$OUT"/gpu_*.log; do
        if grep -aq '^\[==========\] .* ran\.' "$f"; then
          echo "$(basename "$f"): $(grep -ah '^\[  PASSED  \]' "$f" | tr -s ' ')" \
            "$(grep -ah '^\[  FAILED  \] [0-9]* test' "$f" | tr -s ' ')"
        else
          echo "$(basename "$f"): no summary: ran past SHARDS_TIMEOUT (${SHARDS_TIMEOUT:-200} s)"
        fi
      done
      grep -ah '^\[  FAILED' "$OUT"/gpu_*.log | sort -u | head -20 ;;
    pyext)  # the Python package for the device's own Python, in /tmp/kpy (export PYTHONPATH=/tmp/kpy
            # after it): the extension built against $B/libkiln.a with the image's nanobind and
            # CMake, the package and its torch_dynamo_backends entry point laid out beside it
      py=/tmp/kpy; pb=/tmp/kpy-build; mkdir -p $py $pb
      cat > $pb/CMakeLists.txt <<CM
cmake_minimum_required(VERSION 3.18)
project(kpy CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(Python 3.9 COMPONENTS Interpreter Development.Module REQUIRED)
find_package(nanobind CONFIG REQUIRED PATHS $(python3 -m nanobind --cmake_dir))
find_package(CUDAToolkit REQUIRED)
find_package(Threads REQUIRED)
file(GLOB S $PWD/tools/python/src/*.cpp)
nanobind_add_module(_kiln NB_STATIC \${S})
target_include_directories(_kiln PRIVATE $PWD/include $PWD/tools/python/src)
target_compile_definitions(_kiln PRIVATE KILN_VERSION="0.1.0")
target_link_libraries(_kiln PRIVATE $PWD/$B/libkiln.a CUDA::nvrtc \${CMAKE_DL_LIBS} Threads::Threads)
CM
      (cd $pb && cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v python3)" \
        -DCUDAToolkit_ROOT=/usr/local/cuda . > /dev/null && ninja > /dev/null) || echo "pyext: build failed"
      rm -rf $py/kiln && cp -r tools/python/kiln $py/kiln && cp $pb/_kiln*.so $py/kiln/ &&
        cp -r tools/onnx2kiln $py/kiln/onnx2kiln
      mkdir -p $py/kiln-0.1.0.dist-info
      printf 'Metadata-Version: 2.1\nName: kiln\nVersion: 0.1.0\n' > $py/kiln-0.1.0.dist-info/METADATA
      printf '[torch_dynamo_backends]\nkiln = kiln.dynamo:kiln_backend\n' \
        > $py/kiln-0.1.0.dist-info/entry_points.txt
      ls $py/kiln/_kiln*.so ;;
    attention-ab)  # the wgmma attention's rule against ATTENTION_VARIANT (NAME:KILN_SCHEDULE, default
                   # the ping-pong consumers), f16 prefill at D 64 and 128
      timeout ${ATTENTION_TIMEOUT:-200} python3 bench/bench_attention.py --kiln $B/kiln --dtypes f16 \
        --dims 64,128 --seqs ${ATTENTION_SEQS:-4096,16384} --only prefill --no-mma \
        --variant "${ATTENTION_VARIANT:-pingpong:attention.pingpong=1}" --out "$OUT/attn.json" \
        --md "$OUT/attn.md" > "$OUT/attn.log" 2>&1
      cat "$OUT/attn.md" ;;
    latency)  # (after pyext) where LATENCY_MODELS' backend call windows go: host time per call and
              # the windows with the host hidden (bench_torch_backend.py --latency)
      PYTHONPATH=/tmp/kpy timeout ${LATENCY_TIMEOUT:-150} python3 bench/bench_torch_backend.py --latency \
        --models ${LATENCY_MODELS:-squeezenet1_1} --kiln $B/kiln 2>&1 | grep -v Warning ;;
    *) echo "unknown step $step" ;;
  esac
done
