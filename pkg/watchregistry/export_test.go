package watchregistry

// CheckInvariants exposes the registry's bookkeeping check to the external
// tests.
func CheckInvariants[K comparable](r *Registry[K]) error { return r.checkInvariants() }
