package controller_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/vmipam/vmipam/controller"
)

// TestKlogLinesUseTheStructuredLogger: client-go's klog lines (here a leader-election-like
// message) come out as JSON lines of vmipam's logger with ISO-8601 times, not as klog text.
func TestKlogLinesUseTheStructuredLogger(t *testing.T) {
	var buf bytes.Buffer
	opts := controller.LogOptions()
	opts.DestWriter = &buf
	controller.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	klog.InfoS("successfully acquired lease", "lease", "vmipam-system/vmipam-controller")
	klog.ErrorS(nil, "failed to list *v1.Pod: pods is forbidden")
	klog.Flush()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines from klog, got %d:\n%s", len(lines), buf.String())
	}
	for _, line := range lines {
		var entry struct {
			TS  string `json:"ts"`
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", entry.TS); err != nil {
			t.Errorf("ts %q is not ISO-8601: %v", entry.TS, err)
		}
	}
	if !strings.Contains(lines[0], `"lease":"vmipam-system/vmipam-controller"`) {
		t.Errorf("klog's key/value pairs are lost: %s", lines[0])
	}
}
