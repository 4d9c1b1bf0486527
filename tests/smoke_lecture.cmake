# CLI checks for the lecture suite and `dlbench train` (included by tests/CMakeLists.txt).
dlb_smoke(lecture_quick 0 run --suite lecture --device cpu --quick --no-report --out ${OUT}/lecture)
dlb_smoke(lecture_bad_input_mode 2 run --suite lecture --device cpu --quick --input teleport --no-report --out ${OUT}/x)
dlb_smoke(train_unknown_model 2 train --model resnet9000 --dataset synthetic --epochs 1 --device cpu)
dlb_smoke(train_batch_zero 2 train --model mlp --dataset synthetic --epochs 1 --device cpu --batch 0)
dlb_smoke(train_batch_negative 2 train --model mlp --dataset synthetic --epochs 1 --device cpu --batch -4)
dlb_smoke(train_epochs_zero 2 train --model mlp --dataset synthetic --epochs 0 --device cpu)
dlb_smoke(train_missing_dataset 2 train --model mlp --dataset /nonexistent/dlbench-data --epochs 1 --device cpu)
dlb_smoke(train_junk_dataset 2 train --model mlp --dataset ${CMAKE_CURRENT_SOURCE_DIR} --epochs 1 --device cpu)
dlb_smoke(train_bad_device 2 train --model mlp --dataset synthetic --epochs 1 --device tpu)
dlb_smoke(train_bad_lr 2 train --model mlp --dataset synthetic --epochs 1 --device cpu --lr -1)
dlb_smoke(train_mlp_synthetic_small 0 train --model mlp --dataset synthetic --epochs 1 --device cpu --limit 2048)

dlb_smoke(train_bf16_small 0 train --model mlp --dataset synthetic --epochs 1 --device cpu --limit 1024 --dtype bf16)
dlb_smoke(train_fp16_on_cpu 2 train --model mlp --dataset synthetic --epochs 1 --device cpu --dtype fp16)
dlb_smoke(train_device_all 2 train --model mlp --dataset synthetic --epochs 1 --device all)
# DLBENCH_PEER_THREADS must be a thread count (checked before any case runs).
add_test(NAME smoke.lecture_peer_threads_bad COMMAND bash -c
  "out=$(DLBENCH_PEER_THREADS=many \"$1\" run --suite lecture --device cpu --peer pytorch --quick --no-report --out ${OUT}/x 2>&1 >/dev/null); rc=$?; \
   [ $rc -eq 2 ] && printf '%s' \"$out\" | grep -q 'DLBENCH_PEER_THREADS=many' && echo ok"
  bash ${DLB_CLI})
set_tests_properties(smoke.lecture_peer_threads_bad PROPERTIES LABELS smoke TIMEOUT 60)
