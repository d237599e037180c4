package pgstore

import "context"

// OpenAtVersion is Open migrating only up to version, as an older stamen
// leaves the database.
func OpenAtVersion(ctx context.Context, cfg Config, version int) (*Store, error) {
	return open(ctx, cfg, version)
}

// Setting is a setting of the store's connections.
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// SetFailureWindow sets how many of the newest failures Failures reads for
// the examples, and returns the function that restores it.
func SetFailureWindow(n int) (restore func()) {
	old := failureWindow
	failureWindow = n
	return func() { failureWindow = old }
}
