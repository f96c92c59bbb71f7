package protection

// Event reasons of the control-plane protection webhook.
const (
	// EventUnauthorizedPlacement is recorded on a pod that a request put on
	// a protected node without authorization, in mode Inform. The note says
	// who, what and how to get authorized.
	EventUnauthorizedPlacement = "UnauthorizedProtectedNodePlacement"
)

// EventFailurePolicySet is recorded on the ControlPlaneProtection when the
// pods webhook's failurePolicy was changed to follow the groups' modes:
// Fail while a group is in mode Enable, Ignore otherwise. The note says
// what an outage of the webhook then refuses.
const EventFailurePolicySet = "WebhookFailurePolicySet"
