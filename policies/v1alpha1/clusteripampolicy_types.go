package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// FailurePolicy says what an evaluation error of a policy means (DESIGN.md §3.3).
// +kubebuilder:validation:Enum=Fail;Ignore
type FailurePolicy string

const (
	// FailurePolicyFail skips the interface with reason PolicyError.
	FailurePolicyFail FailurePolicy = "Fail"
	// FailurePolicyIgnore treats the policy as not matching: all its parts are passed over.
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

// PolicyMode says whether a matching policy decides or only records what it would decide.
// +kubebuilder:validation:Enum=Enforce;Audit
type PolicyMode string

const (
	// PolicyModeEnforce policies decide when they match.
	PolicyModeEnforce PolicyMode = "Enforce"
	// PolicyModeAudit policies are evaluated and the decision they would make as Enforce
	// policies recorded in the trace; they never decide any part.
	PolicyModeAudit PolicyMode = "Audit"
)

// NetworkKind is the type of network a policy matches: Network or ClusterNetwork.
// +kubebuilder:validation:Enum=Network;ClusterNetwork
type NetworkKind string

// Condition type, reasons and limits of ClusterIPAMPolicy status.
const (
	// ConditionReady is True when the current generation compiled and serves.
	ConditionReady = "Ready"
	// ReasonCompiled: the current generation compiled and serves.
	ReasonCompiled = "Compiled"
	// ReasonCompilationFailed: the current generation did not compile; the message lists
	// every error with its field path and which generation, if any, still serves.
	ReasonCompilationFailed = "CompilationFailed"
	// ConditionWithinCostLimits is True when every expression of the last generation that
	// compiled is estimated within the per-call cost limit it runs under, and False when one
	// is not: the message names them; on inputs near the declared bounds the run time stops
	// them with a PolicyError.
	ConditionWithinCostLimits = "WithinCostLimits"
	// ReasonEstimatesWithinLimits: every expression is estimated within the limits.
	ReasonEstimatesWithinLimits = "EstimatesWithinLimits"
	// ReasonEstimateExceedsLimit: an expression, or the policy's expressions together, are
	// estimated beyond a limit they run under.
	ReasonEstimateExceedsLimit = "EstimateExceedsLimit"
	// ConditionEvaluatesWithoutErrors is False while the policy's evaluations fail on some
	// inputs — passed over (failurePolicy Ignore), recorded as failed (Audit) or a PolicyError
	// (failurePolicy Fail) —, with the count, since when, and a sample of the last error (the
	// VM, the interface, the field path); True once none has failed for ten minutes.
	ConditionEvaluatesWithoutErrors = "EvaluatesWithoutErrors"
	// ReasonNoEvaluationErrors: no evaluation of the policy failed lately.
	ReasonNoEvaluationErrors = "NoEvaluationErrors"
	// ReasonEvaluationFailed: evaluations of the policy failed lately; the message says
	// how many, since when, and the last one.
	ReasonEvaluationFailed = "EvaluationFailed"
)

// NetworkSelector matches interfaces by network type and, optionally, name.
type NetworkSelector struct {
	Type NetworkKind `json:"type"`
	// Name of the network; empty matches any network of Type.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`
}

// Match restricts a policy to some interfaces; every part given must hold, and an empty
// Match matches every additional interface.
type Match struct {
	// NamespaceSelector is matched against the labels of the VM's Namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// VMSelector is matched against the VM's labels.
	// +optional
	VMSelector *metav1.LabelSelector `json:"vmSelector,omitempty"`
	// Networks matches when the interface's network is any of these.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Networks []NetworkSelector `json:"networks,omitempty"`
}

// NamedExpression is a named CEL expression (a match condition or a variable).
type NamedExpression struct {
	// Name of a variable is a CEL identifier of at most 63 characters (it is referenced as
	// variables.<name>); of a match condition, a qualified name as in
	// ValidatingAdmissionPolicy (an optional DNS subdomain prefix and '/', then at most 63
	// alphanumeric characters, '-', '_' or '.') or a CEL identifier. The schema admits either;
	// the webhook and the controller hold each list to its own form.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-zA-Z_][a-zA-Z0-9_]*|([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$`
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=5120
	Expression string `json:"expression"`
}

// Expression is a single CEL expression.
type Expression struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=5120
	Expression string `json:"expression"`
}

// SkipRule skips the interface when Expression is true; the first true rule wins.
type SkipRule struct {
	// Name identifies the rule in traces; a rule of a later (lower-precedence) policy with the
	// same name is replaced by this one.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Expression must evaluate to bool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=5120
	Expression string `json:"expression"`
	// Reason is the CamelCase reason shown in NetworkReady, events and metrics.
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// Message is a static message; MessageExpression, when set, takes precedence and Message
	// is its fallback should it fail.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// MessageExpression must evaluate to string.
	// +kubebuilder:validation:MaxLength=5120
	// +optional
	MessageExpression string `json:"messageExpression,omitempty"`
}

// ClusterIPAMPolicySpec is the policy. DESIGN.md §2.1 and §3 define its semantics. A policy
// states only what it changes: allocation and hotplug are optional (the first matching policy
// that sets one decides it), skip rules accumulate over all matching policies; it must set at
// least one of the three.
//
// +kubebuilder:validation:XValidation:rule="has(self.allocation) || (has(self.skipRules) && size(self.skipRules) > 0) || has(self.hotplug)",message="a policy must set at least one of allocation, skipRules, hotplug"
type ClusterIPAMPolicySpec struct {
	// Priority orders policies: lower is evaluated first; ties are broken by name. Absent
	// means 100 (the CRD's default, which the API server applies; vmipam's own decoders apply
	// it from the CRD's structural schema, not from a copy).
	// +kubebuilder:default=100
	// +optional
	Priority int32 `json:"priority"`
	// +kubebuilder:default=Fail
	// +optional
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	// +kubebuilder:default=Enforce
	// +optional
	Mode PolicyMode `json:"mode,omitempty"`
	// +optional
	Match Match `json:"match,omitempty"`
	// MatchConditions must all evaluate to true for the policy to match.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	MatchConditions []NamedExpression `json:"matchConditions,omitempty"`
	// Variables are evaluated lazily, at most once per interface.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Variables []NamedExpression `json:"variables,omitempty"`
	// Allocation evaluates to "Auto", "Static", "None", or "Pass" (the next matching policy
	// that sets allocation decides). Absent: the next matching policy that sets it decides.
	// +optional
	Allocation *Expression `json:"allocation,omitempty"`
	// SkipRules accumulate over all matching policies, in policy order then rule order; the
	// first true rule skips the interface. A rule named like a rule of a later policy replaces
	// it (expression "false" disables it). Names starting with "vmipam:" are reserved.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	SkipRules []SkipRule `json:"skipRules,omitempty"`
	// Hotplug evaluates to bool: may a change of this interface be applied to a running VM?
	// Absent: the next matching policy that sets it decides (the default policy: true).
	// +optional
	Hotplug *Expression `json:"hotplug,omitempty"`
}

// ClusterIPAMPolicyStatus reports compilation.
type ClusterIPAMPolicyStatus struct {
	// ObservedGeneration is the generation last compiled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ServingGeneration is the generation in force: the newest that compiled. Zero when none
	// ever compiled, in which case the policy is not used.
	// +optional
	ServingGeneration int64 `json:"servingGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterIPAMPolicy decides how VM interfaces get addresses.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ipampolicy
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].status`
// +kubebuilder:printcolumn:name="Serving",type=integer,JSONPath=`.status.servingGeneration`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterIPAMPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterIPAMPolicySpec   `json:"spec"`
	Status ClusterIPAMPolicyStatus `json:"status,omitempty"`
}

// ClusterIPAMPolicyList is a list of ClusterIPAMPolicies.
//
// +kubebuilder:object:root=true
type ClusterIPAMPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterIPAMPolicy `json:"items"`
}
