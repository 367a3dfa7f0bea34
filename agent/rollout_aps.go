package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/cas-engine/cas/conformal"
)

// APSFile is the part of a calibration report (qhat.json, written by
// `cas calibrate aps` or `cas conformal calibrate-aps`) a rollout needs.
type APSFile struct {
	QHat        *conformal.JSONFloat `json:"qhat"`
	Temperature *float64             `json:"temperature"`
	MinDocs     *int                 `json:"min_docs"`
	MaxDocs     *int                 `json:"max_docs"`
}

// ParseAPS reads a calibration report: "qhat" is required ("+Inf" allowed:
// keep up to max_docs); "temperature", "min_docs" and "max_docs" default to
// the paper's T = 0.01 and [1, 5].
func ParseAPS(data []byte) (conformal.APS, float64, error) {
	var f APSFile
	if err := json.Unmarshal(data, &f); err != nil {
		return conformal.APS{}, 0, fmt.Errorf("parse APS calibration: %w", err)
	}
	if f.QHat == nil {
		return conformal.APS{}, 0, fmt.Errorf(`APS calibration has no "qhat"`)
	}
	q := float64(*f.QHat)
	if math.IsNaN(q) {
		return conformal.APS{}, 0, fmt.Errorf(`APS calibration: "qhat" is NaN`)
	}
	a := conformal.PaperAPS()
	if f.Temperature != nil {
		a.Temperature = *f.Temperature
	}
	if f.MinDocs != nil {
		a.MinDocs = *f.MinDocs
	}
	if f.MaxDocs != nil {
		a.MaxDocs = *f.MaxDocs
	}
	if err := a.Validate(); err != nil {
		return conformal.APS{}, 0, fmt.Errorf("APS calibration: %w", err)
	}
	return a, q, nil
}

// LoadAPS reads a calibration report file (see ParseAPS).
func LoadAPS(path string) (conformal.APS, float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return conformal.APS{}, 0, fmt.Errorf("load %s: %w", path, err)
	}
	a, q, err := ParseAPS(data)
	if err != nil {
		return conformal.APS{}, 0, fmt.Errorf("load %s: %w", path, err)
	}
	return a, q, nil
}

// SetAPS turns APS truncation on with threshold q̂.
func (c *RolloutConfig) SetAPS(a conformal.APS, qhat float64) {
	c.APS, c.QHat = &a, qhat
}
