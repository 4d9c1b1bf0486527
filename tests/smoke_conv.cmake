# CLI checks for the conv suite (included by tests/CMakeLists.txt).
dlb_smoke(conv_quick 0 run --suite conv --device cpu --quick --no-report --out ${OUT}/conv)
dlb_smoke(conv_batch_override 0 run --suite conv --device cpu --quick --batch 1,3 --no-report --out ${OUT}/conv_batch)
dlb_smoke(conv_batch_zero 2 run --suite conv --device cpu --batch 0 --no-report --out ${OUT}/x)
