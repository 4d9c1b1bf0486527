# Suite "amp" from the CLI: the CPU quick run (fp32 vs bf16, every case verified), and the bad-input
# contract: fp16/tf32 on a CPU-only run and an unknown dtype exit 2 with one line.
dlb_smoke(amp_cpu_quick 0 run --suite amp --device cpu --quick --no-report --out ${OUT}/amp)
dlb_smoke(amp_fp16_on_cpu 2 run --suite amp --device cpu --dtype fp16 --quick --no-report --out ${OUT}/x)
dlb_smoke(amp_tf32_on_cpu 2 run --suite amp --device cpu --dtype tf32,fp16 --quick --no-report --out ${OUT}/x)
dlb_smoke(amp_unknown_dtype 2 run --suite amp --device cpu --dtype fp12 --quick --no-report --out ${OUT}/x)
dlb_smoke(amp_batch_zero 2 run --suite amp --device cpu --batch 0 --no-report --out ${OUT}/x)
