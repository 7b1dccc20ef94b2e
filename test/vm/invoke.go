package vm

import (
	"fmt"
	"io"

	"github.com/swift-rdma/swift-containerd/verbs"
)

// WriteInvokeChart draws the gateway scenario's invocation figures (the
// invoke.* keys of bench.json): each way of invoking the same function,
// median and p99, in ms.
func WriteInvokeChart(w io.Writer, kv map[string]any) error {
	num := func(k string) (float64, error) {
		v, ok := kv[k].(float64)
		if !ok {
			return 0, fmt.Errorf("invoke chart: %s is %v, want a number", k, kv[k])
		}
		return v, nil
	}
	ways := []struct{ row, key string }{
		{"HTTP /run (swift-gateway)", "invoke.http"},
		{"swift-run in the container", "invoke.inpod"},
		{"warm process (no fork)", "invoke.warm"},
		{"ctr task exec ... swift-run", "invoke.exec"},
	}
	med, p99 := map[string]float64{}, map[string]float64{}
	var rows []string
	for _, x := range ways {
		m, err := num(x.key + "_us")
		if err != nil {
			return err
		}
		p, err := num(x.key + "_p99_us")
		if err != nil {
			return err
		}
		rows = append(rows, x.row)
		med[x.row], p99[x.row] = m/1000, p/1000
	}
	ratio, err := num("invoke.ratio")
	if err != nil {
		return err
	}
	over, err := num("invoke.exec_over_http")
	if err != nil {
		return err
	}
	title := fmt.Sprintf("invoking a function that does one RDMA round trip (rxe, qemu): HTTP / swift-run %.2f, exec / HTTP %.1f", ratio, over)
	return verbs.WriteChartSVG(w, title, "ms", rows, []verbs.ChartSeries{
		{Name: "median", Color: "#27ae60", Values: med},
		{Name: "p99", Color: "#7f8c8d", Values: p99},
	})
}
