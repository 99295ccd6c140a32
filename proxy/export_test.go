package proxy

// SetLeaseRetry turns the retries of a lease's release on client close on
// or off, for the test that shows what they prevent.
func SetLeaseRetry(s *Server, on bool) { s.noLeaseRetry = !on }
