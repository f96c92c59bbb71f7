package protection

// Event reasons of the control-plane protection webhook.
const (
	// EventUnauthorizedPlacement is recorded on a pod that a request put on
	// a protected node without authorization, in mode Inform. The note says
	// who, what and how to get authorized.
	EventUnauthorizedPlacement = "UnauthorizedProtectedNodePlacement"
)
