package bert

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/hfbind"
	"github.com/cas-engine/cas/model/safetensors"
)

// loadVariables loads the tensors of leaves (checked by hfbind.Check; names
// carry prefix in the file) into frozen context variables named by
// hfbind.VariableScope, converting one tensor at a time to float32, and
// binds each leaf's field to its variable.
func loadVariables(ctx *context.Context, r safetensors.Reader, source, prefix string, leaves []hfbind.Leaf) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v", source, r)
		}
	}()
	for _, l := range leaves {
		if !l.Needed {
			continue
		}
		full := prefix + l.Name
		ti, _ := r.Info(full)
		t := tensors.FromShape(shapes.Make(dtypes.Float32, ti.Shape...))
		var ferr error
		tensors.MustMutableFlatData(t, func(flat []float32) { ferr = r.Float32Into(full, flat) })
		if ferr != nil {
			return ferr
		}
		scope, name := hfbind.VariableScope(context.RootScope, l.Name)
		v := ctx.InAbsPath(scope).Checked(false).VariableWithValue(name, t)
		v.SetTrainable(false)
		l.Set(v)
	}
	return nil
}
