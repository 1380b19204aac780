package evaluator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
)

// Each library call's estimate bounds what it is charged at run time on an input at the
// declared bounds, evaluated alone: the per-call limit is checked against the estimate (with
// the deep operations' charges, deepCharges, as the compiler adds them), so a call charged
// more than estimated lets an admitted expression exceed the limit at run time. Kubernetes'
// library estimates join() at one traversal of its result and charges it two
// (FuzzGeneratedPolicy: holders.vms.join("").lowerAscii().trim().split("") was estimated at
// 97,157 and charged 103,647). Class: an estimate formula that differs from the run-time
// charge of the same call. The cases cover every function of the environment whose charge
// depends on its input's size, at the bounds, through dyn() dispatch and optionals too.
func TestLibraryEstimatesBoundTheirCharges(t *testing.T) {
	env := newExpressionsEnv(t)
	act := boundsInput()
	for _, expr := range append(libraryEstimateCases, wideCases...) {
		src := expr
		if i := strings.Index(expr, "' + "); len(expr) > 200 && i > 0 {
			src = "('…" + expr[i:] // the wide literal elided
		}
		checked, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", src, iss.Err())
		}
		est, err := env.EstimateCost(checked, estimatorOf(checked.NativeRep(), nil))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		deep, _, _ := deepCharges(checked.NativeRep(), nil)
		estimate := addSaturating(est.Max, deep)
		prg, err := env.Program(checked, cel.CostLimit(1<<40)) // charges, not the limit, are compared
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		_, det, err := prg.Eval(act)
		if err != nil {
			t.Errorf("%s: %v (estimated %d)", src, err, estimate)
			continue
		}
		if actual := *det.ActualCost(); actual > estimate {
			t.Errorf("%s: charged %d, estimated at most %d", src, actual, estimate)
		}
	}
}

// boundsInput is an activation whose strings, lists and maps are at their declared bounds
// (input.go): 256 holders of 253 characters, 256 labels, a 262,144-character annotation.
func boundsInput() map[string]any {
	in := Input{}
	for i := range 256 {
		in.Holders.VMs = append(in.Holders.VMs, fmt.Sprintf("%s-%03d", strings.Repeat("h", 249), i))
	}
	in.VM.Name = strings.Repeat("n", 253)
	in.VM.UID = strings.Repeat("u", 36)
	in.VM.Labels = map[string]string{}
	for i := range 256 {
		in.VM.Labels[fmt.Sprintf("%s-%03d", strings.Repeat("k", 59), i)] = strings.Repeat("v", 63)
	}
	in.VM.Annotations = map[string]string{"a": strings.Repeat("a", 262144), "b": strings.Repeat("b", 1000)}
	in.Interface.Name = strings.Repeat("i", 253)
	in.IPAddress.Address = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" // 45 characters
	return map[string]any{"vm": &in.VM, "holders": &in.Holders, "interface": &in.Interface, "ipAddress": &in.IPAddress,
		"network": &in.Network, "namespaceObject": &in.Namespace, "change": &in.Change}
}

// libraryEstimateCases are the calls TestLibraryEstimatesBoundTheirCharges evaluates, by
// family.
var libraryEstimateCases = []string{
	// join (Kubernetes' strings library charges two traversals of the result).
	"holders.vms.join('')",
	"holders.vms.join(', ')",
	"holders.vms.join('').lowerAscii().trim().split('')",
	"holders.vms.map(x, x.upperAscii()).join('-')",
	"vm.labels.map(k, k + '=' + vm.labels[k]).join(', ')",
	"vm.name.split('').join('')",
	"[vm.name, vm.name].join('/')",
	"holders.vms.join('').replace('h', 'hh')",
	"holders.vms.join('').substring(1)",
	// ext strings, charged by stringCostTrackers and the library.
	"vm.name.charAt(0)",
	"vm.annotations['a'].charAt(5)",
	"vm.name.indexOf(vm.name)",
	"vm.name.lastIndexOf('n', 3)",
	"vm.name.lowerAscii()",
	"vm.annotations['a'].substring(1, 200)",
	"vm.name.replace('', 'x')",
	"vm.name.replace('n', 'nn', 3)",
	"vm.name.split('')",
	"vm.name.split('n', 5)",
	// A traversal of a split's parts, by their characters together (issue #15, tester atk17).
	"vm.annotations['a'].split('a', 32).includes('x')",
	"vm.annotations['a'].split('', 32).indexOf('x')",
	"vm.name.split('').max()",
	"vm.annotations['a'].split('a', 32).sort().lastIndexOf('x')",
	"strings.quote(vm.annotations['a'])",
	// cel-go's standard string functions.
	"vm.name.contains(vm.name)",
	"vm.annotations['a'].startsWith(vm.annotations['b'])",
	"vm.annotations['a'] + vm.annotations['b']",
	"vm.annotations['a'] < vm.annotations['a']",
	"vm.annotations['a'].size()",
	"bytes(vm.annotations['a']).size()",
	"string(bytes(vm.name))",
	"vm.creationTimestamp.getHours('Europe/Berlin')",
	// format().
	"'%s'.format([vm.name])",
	"'%x'.format([vm.name])",
	"'%.3f'.format([1.0])",
	"'%s'.format([holders.vms])",
	// Regular expressions.
	"vm.name.matches('^n+$')",
	"vm.name.findAll('n')",
	"vm.annotations['a'].findAll('a', 3)",
	// ip, cidr, url, semver, quantity.
	"isIP(vm.name)",
	"ip.isCanonical(ipAddress.address)",
	"cidr('::/0').containsIP(ipAddress.address)",
	"cidr('::/0').containsCIDR(ipAddress.address + '/128')",
	"url('https://' + vm.name + '/x?y=z').getQuery()",
	"url('https://' + vm.name) == url('https://' + vm.name)",
	"isSemver(vm.name, true)",
	// lists traversals of strings, by the list's derived bound (atk10 finding 2).
	"vm.annotations.map(k, vm.annotations[k]).includes('corp')",
	"vm.labels.map(k, k + vm.labels[k]).max() != ''",
	"[vm.name, vm.annotations['a']].min() != ''",
	"holders.vms.map(h, h + h).isSorted()",
	"['a', vm.annotations['a']].lastIndexOf('a') >= 0",
	"[vm.name, vm.annotations['a']].join(vm.name) != ''", // a computed separator (atk13)
	// Methods of parsed values, charged by the text the value was parsed from.
	"url('https://x/?' + vm.name.split('').join('&')).getQuery()",
	"[url('https://x/?' + vm.name.split('').join('&'))].map(u, u.getQuery().size())",
	"url('https://x/' + vm.name.split('').join(' ')).getEscapedPath()",
	"url('https://x/' + vm.name.split('').join(' ')).getEscapedPath().size()",
	"url('https://' + vm.name + ':80/').getHostname()",
	"url('https://' + vm.name + ':80/').getPort()",
	"url('https://x/' + vm.name.split('').join(' ') + '?' + vm.name) != url('https://x/' + vm.name.split('').join(' ') + '?' + vm.name)",
	"semver('1.0.0-' + vm.name.split('').join('.')).compareTo(semver('1.0.0-' + vm.name.split('').join('.')))",
	"semver('1.0.0-' + vm.name.split('').join('.')).isLessThan(semver('1.0.0-' + vm.name.split('').join('.')))",
	"semver('1.0.0-' + vm.name.split('').join('.'), true) == semver('1.0.0-' + vm.name.split('').join('.'))",
	"semver('1.0.0-' + vm.name.split('').join('.') + '.' + vm.name.split('').join('.')) != semver('1.0.0-' + vm.name.split('').join('.') + '.' + vm.name.split('').join('.'))",
	"[semver('1.0.0-' + vm.name.split('').join('.') + '.' + vm.name.split('').join('.'))].all(s, s.isGreaterThan(s))",
	"quantity('1e64') == quantity('1e-64')",
	"format.named(vm.annotations['a']).hasValue()",
	// The same through dyn, as a policy variable holding a parsed value is declared.
	"dyn(url('https://x/?' + vm.name.split('').join('&'))).getQuery()",
	"dyn(url('https://x/' + vm.name.split('').join(' '))).getEscapedPath()",
	"dyn(url('https://x/' + vm.name.split('').join(' '))) == dyn(url('https://x/' + vm.name.split('').join(' ')))",
	"dyn(semver('1.0.0-' + vm.name.split('').join('.'))).compareTo(dyn(semver('1.0.0-' + vm.name.split('').join('.'))))",
	"dyn(semver('1.0.0-' + vm.name.split('').join('.') + '.' + vm.name.split('').join('.'))) == dyn(semver('1.0.0-' + vm.name.split('').join('.') + '.' + vm.name.split('').join('.')))",
	"[dyn(semver('1.0.0-' + vm.name.split('').join('.')))].all(s, s != s)",
	"dyn(quantity('1e64')) != dyn(quantity('1e-64'))",
	"dyn(quantity('1e64')).add(quantity('1e-64')).isInteger()",
	"isQuantity(vm.name)",
	"quantity('1Gi').add(quantity('1Mi')).isInteger()",
	// format.<name>().validate(): charged by each format's own regex size.
	"format.dns1123Label().validate(vm.name)",
	"format.uri().validate(vm.name)",
	"format.uri().validate('abcdefghij')",
	"format.uuid().validate('abcdefghij')",
	"format.byte().validate('abcdefghij')",
	"format.date().validate('abcdefghij')",
	"format.datetime().validate(vm.uid)",
	"format.named('uri').value().validate(vm.name)",
	// Kubernetes' lists library, charged one traversal of the list.
	"holders.vms.isSorted()",
	"holders.vms.max()",
	"holders.vms.indexOf(vm.name)",
	"holders.vms.lastIndexOf(vm.name)",
	"holders.vms.includes(vm.name)",
	"holders.vms.map(x, size(x)).sum()",
	// The same on lists whose elements are dyn, or on a dyn receiver (dispatched at run time:
	// no overload's tracker applies, the library charges one traversal of the list).
	"holders.vms.map(x, dyn(x)).max()",
	"holders.vms.map(x, dyn(x)).isSorted()",
	"holders.vms.map(x, dyn(x)).includes('x')",
	"vm.labels.map(k, dyn(vm.labels[k])).min()",
	"[dyn(vm.annotations['a'])].indexOf('x')",
	"dyn(holders.vms).includes('x')",
	"dyn(holders.vms).indexOf('')",
	"dyn([vm.annotations['a']]).lastIndexOf('x')",
	"dyn(holders.vms.map(x, [x])).indexOf(['x'])",
	// ext lists and sets.
	"holders.vms.reverse()",
	"holders.vms.slice(0, 100)",
	"holders.vms.sort()",
	"holders.vms.sortBy(x, x)",
	"[holders.vms, holders.vms].flatten()",
	"sets.contains(holders.vms, holders.vms)",
	"sets.intersects(holders.vms, ['x'])",
	"lists.range(256)",
	// Deep and flat comparisons.
	"vm.name in holders.vms",
	"vm.annotations['a'] in [vm.annotations['a']]",
	"vm.annotations['a'] in ['x', 'y']", // a list of constants, which cel-go's optimizer would plan as a set
	"lists.range(256).exists(i, vm.name in ['a', 'b', 'c'] && i < 0)",
	"vm.labels == vm.labels",
	"holders.vms == holders.vms",
	"holders.vms != dyn(holders.vms)",
	"holders.vms.map(x, [x]).includes(['x'])",
	// Strings sized by the checker (a concatenation), seen through dyn(), an optional or a list.
	"dyn(vm.annotations['a'] + vm.annotations['a']).charAt(0)",
	"dyn(vm.annotations['a'] + vm.annotations['a']).split('a', 2)",
	"dyn(vm.annotations['a'] + vm.annotations['a']).replace('a', '', 2)",
	"dyn(vm.annotations['a'] + vm.annotations['a']).matches('^a')",
	"dyn(vm.annotations['a'] + vm.annotations['a']).findAll('a', 1)",
	"optional.of(vm.annotations['a'] + vm.annotations['a']).value().charAt(0)",
	"optional.of(vm.annotations['a'] + vm.annotations['a']).value().indexOf('b')",
	"dyn([vm.annotations['a'] + vm.annotations['a']]).map(x, x.charAt(0))",
	// Accesses on a computed operand (a relative attribute) or on a dyn value.
	"[vm.name][0]",
	"holders.vms.map(x, [x][0])",
	"[[vm.name]][0][0]",
	"[vm][0].name",
	"{'a': vm.name}.a",
	"vm.labels.map(k, {k: 1}[?k]).size()",
	"optional.of(vm).value().name",
	"optional.of(vm).?name.hasValue()",
	"has([vm][0].name)",
	"dyn(vm).name",
	"[vm, vm].map(x, dyn(x)).map(x, x.name)",
	"has(dyn(vm).name)",
	// Optionals.
	"vm.labels[?'x'].orValue(vm.name).indexOf('n')",
	"optional.of(vm.annotations['a']).value().indexOf('a')",
	// Deep and flat comparisons through optionals, which compare what they hold (issue #15:
	// an optional counted one node whatever it held, to the estimate and the run time).
	"optional.of(holders.vms.map(x, [x])) in [optional.of(holders.vms.map(x, [x]))]",
	"optional.of(optional.of(vm.labels)) in [optional.of(optional.of(vm.labels)), optional.none()]",
	"[optional.of(holders.vms.map(x, [x]))].includes(optional.of(holders.vms.map(x, [x])))",
	"[optional.of(holders.vms.map(x, [x]))].indexOf(optional.of(holders.vms.map(x, [x])))",
	"[optional.of(holders.vms), optional.of(holders.vms)].distinct().size()",
	"sets.contains([optional.of(vm.labels.map(k, [k]))], [optional.of(vm.labels.map(k, [k]))])",
	"sets.equivalent([optional.of(vm.labels)], [optional.of(vm.labels)])",
	"[optional.of(holders.vms)] == [optional.of(holders.vms)]",
	"{'a': optional.of(vm.labels)} == {'a': optional.of(vm.labels)}",
	"dyn(optional.of(holders.vms)) == dyn(optional.of(holders.vms))",
	"[vm.labels[?'x'], vm.labels[?'y']] == [optional.none(), optional.none()]",
	"optional.of(vm.name) in [optional.of(vm.name), vm.labels[?'x']]",
	"optional.of(vm.annotations['a']) in [optional.of(vm.annotations['a']), vm.annotations[?'b']]",
	"vm.annotations[?'a'] in [vm.annotations[?'a'], vm.annotations[?'a']]",
	"[vm.annotations[?'a']] == [vm.annotations[?'a']]",
	"[optional.of(vm.annotations['a'])].indexOf(vm.annotations[?'a'])",
	"sets.contains([vm.annotations[?'a']], [vm.annotations[?'a']])",
	"[optional.of(vm), optional.of(vm)].distinct().size()",
	"[vm, vm].distinct().size()",
	"vm in [vm, vm]",
	// Objects, compared by reflect.DeepEqual of what they hold (their parts, deep.go goParts).
	"[holders] == [holders]",
	"[interface, interface].distinct().size()",
	"namespaceObject in [namespaceObject]",
	"sets.contains([network, network], [network])",
	"[optional.of(vm)].includes(optional.of(vm))",
}

// wideCases are calls charged by the bytes of a string built from a literal of 2,000
// four-byte characters, which cel-go's checker sizes in code points (2,000).
var wideCases = func() []string {
	wide := "('" + strings.Repeat("\U0001F600", 2000) + "' + vm.name)"
	var out []string
	for _, call := range []string{".indexOf('x')", ".size()", ".charAt(3)", ".matches('^x')", " in vm.labels",
		".split('').size()", ".replace('x', 'y')", ".lowerAscii().size()"} {
		out = append(out, wide+call)
	}
	return out
}()
