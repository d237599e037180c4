package pgstore

// SetFailureWindow sets how many of the newest failures Failures reads for
// the examples, and returns the function that restores it.
func SetFailureWindow(n int) (restore func()) {
	old := failureWindow
	failureWindow = n
	return func() { failureWindow = old }
}
