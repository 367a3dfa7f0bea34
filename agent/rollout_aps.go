package agent

import (
	"github.com/cas-engine/cas/conformal"
)

// SetAPS turns APS truncation on with the settings a and an E-scale
// threshold q̂_E (k = min{k : c_k ≥ q̂_E} in exact arithmetic; +Inf keeps
// every candidate up to a.MaxDocs). A calibration file's log-scale threshold
// is exact where q̂_E rounds to 1: prefer SetCalibration.
func (c *RolloutConfig) SetAPS(a conformal.APS, qhatE float64) {
	c.SetCalibration(conformal.Calibration{APS: a, QHat: conformal.JSONFloat(qhatE),
		QHatLog: conformal.JSONFloat(conformal.LogScoreFromE(qhatE))})
}

// SetCalibration turns APS truncation on with a calibration
// (conformal.LoadCalibration).
func (c *RolloutConfig) SetCalibration(cal conformal.Calibration) {
	c.APS = &cal
}
