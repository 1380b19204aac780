// Package firstseen remembers when this process first saw an object, on its own clock.
//
// vmipam times several graces from an object's creation (controller/plan: UnansweredGrace of
// an IPAddress SDN has not answered, FreshPendingGrace of an Auto IPAddress SDN answered
// without an address and of a network SDN has not answered) and compares them
// with its own clock, while creationTimestamp is the API server's. When that clock runs ahead
// of the controller's, an object seems to be created in the future and a grace would last the
// skew on top of itself: an hour ahead, a new VM's record waited an hour and 5 s for a network
// SDN had not answered yet. For an object dated after the controller's now — which only a
// clock running ahead makes possible — Clock remembers when this process first saw it, and the
// plan times the grace from the earlier of that and the timestamp (Clock.Created). Only such
// objects are remembered, so with clocks in agreement Clock holds nothing.
package firstseen
