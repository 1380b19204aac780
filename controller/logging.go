package controller

import (
	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogOptions are the options of vmipam's logger before flags: zap's JSON encoder with
// ISO-8601 times (zap's production default is seconds since the epoch, which no one reads).
// The --zap-* flags bound to them may change both.
func LogOptions() zap.Options {
	return zap.Options{TimeEncoder: zapcore.ISO8601TimeEncoder}
}

// SetLogger makes l the logger of controller-runtime and of klog. client-go logs through
// klog — leader election, reflectors (where a missing RBAC verb shows as "forbidden"),
// throttling — and would otherwise write klog's own text format to stderr, between vmipam's
// structured lines (or, in the sandbox, between its tables).
func SetLogger(l logr.Logger) {
	ctrl.SetLogger(l)
	klog.SetLoggerWithOptions(l, klog.ContextualLogger(true))
}
