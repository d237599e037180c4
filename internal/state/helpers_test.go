package state

import "math"

func negZero() float64     { return math.Copysign(0, -1) }
func inf(sign int) float64 { return math.Inf(sign) }
func nan() float64         { return math.NaN() }
