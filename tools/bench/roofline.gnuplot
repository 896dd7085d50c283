# The roofline chart of `bench --profile --csv FILE`: each kernel a point at
# its arithmetic intensity (FLOP per byte moved) and attained GFLOP/s, under
# the copy-bandwidth roof and the matmul roof measured in the same run.
#
#   gnuplot -e "csv='profile.csv'; png='roofline.png'" tools/bench/roofline.gnuplot
#
# Kernels that compute no floating-point work to speak of (flops 0: loops,
# reductions, copies) have no intensity; they are drawn at the memory-bound
# intensity I0 below, at the height their achieved bandwidth gives there, so
# their distance under the slanted roof is their ratio to the copy floor.
if (!exists("csv")) csv = "profile.csv"
if (!exists("png")) png = "roofline.png"

set datafile separator ","
# Columns: 1 mode, 2 T, 3 kernel, 4 calls, 5 us, 6 us_per_call, 7 bytes_per_call,
# 8 flops_per_call, 9 gb_per_s, 10 tflop_per_s, 11 ratio_to_floor, 12 intensity,
# 13 copy_gb_per_s, 14 matmul_tflop_per_s
stats csv using 13 every ::1 nooutput
copy = STATS_max
stats csv using 14 every ::1 nooutput
matmul = STATS_max * 1000.0
stats csv using 5 every ::1 nooutput
total = STATS_sum

I0 = 1.0 / 16
roof(x) = (matmul > 0 && copy * x > matmul) ? matmul : copy * x
x_of(flops, intensity) = flops > 0 ? intensity : I0
y_of(flops, tflops, gbps) = flops > 0 ? tflops * 1000.0 : gbps * I0

set terminal pngcairo size 1400,900 font "sans,11" noenhanced
set output png
set title sprintf("mlpipe kernels against the roofline measured in the same run\ncopy %.0f GB/s, f32 matmul %s; point size ~ share of time; %.0f us in all", copy, matmul > 0 ? sprintf("%.1f TFLOP/s", matmul / 1000.0) : "not measured", total)
set logscale xy 2
set xrange [1.0/64:1024]
set yrange [1:*]
set xlabel "arithmetic intensity (FLOP per byte read + written; memory-bound kernels at 1/16)"
set ylabel "attained GFLOP/s"
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set key top left
set samples 400
set arrow from I0, graph 0 to I0, graph 1 nohead dt 3 lc rgb "#999999"

plot roof(x) title "roof: copy bandwidth, then matmul" with lines lw 2 lc rgb "#333333", \
     csv every ::1 using (x_of($8, $12)):(y_of($8, $10, $9)):(0.6 + 4.0 * sqrt($5 / total)) \
         title "kernels" with points pt 7 ps variable lc rgb "#1f77b4", \
     csv every ::1 using (x_of($8, $12)):(y_of($8, $10, $9)):($5 >= 0.02 * total ? stringcolumn(3) : "") \
         notitle with labels left offset 1,0 font "sans,8" tc rgb "#333333"
