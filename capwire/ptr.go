package capwire

// Ptr returns a pointer to a copy of v: an optional argument of a
// generated façade, of any type, in one expression. Give the type where
// an untyped constant would take another: Ptr[float64](3), Ptr(3.0).
func Ptr[T any](v T) *T { return &v }
