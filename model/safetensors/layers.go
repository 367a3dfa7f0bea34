package safetensors

import (
	"strconv"
	"strings"
)

// maxLayerIndex bounds the layer numbers CountLayers believes.
const maxLayerIndex = 1 << 24

// CountLayers returns 1 + the largest N among names of the form
// prefix + "N." + rest ("model.layers.N.…" in Qwen, "encoder.layer.N.…" in
// BERT): the number of layers the tensors hold, found in time linear in the
// names. Loaders compare it with the config's layer count before building
// anything per layer, so that num_hidden_layers = 10^6 over a two-layer
// file costs nothing.
func CountLayers(names []string, prefix string) int {
	layers := 0
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, prefix)
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(num); err == nil && i >= 0 && i < maxLayerIndex && i+1 > layers {
			layers = i + 1
		}
	}
	return layers
}
