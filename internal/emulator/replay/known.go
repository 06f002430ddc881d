package replay

// KnownDivergences holds, per cassette file name, the replay options that
// account for environment-specific content of that recording. Anything
// listed here is a property of the recording environment, not of ARM.
var KnownDivergences = map[string]Options{
	// Recorded against a resource group and public IP that already existed
	// (first PUTs answered 200; the engine seeds them) and whose group an
	// Azure Policy had tagged ("tags":{"Created":...}).
	"natgatewayclient.yaml": {Ignore: map[int][]string{0: {"tags"}}},
	// Recorded in a subscription whose Azure Policy tags new resource
	// groups with createdAt.
	"virtualmachinescalesetclient.yaml":   {Ignore: map[int][]string{0: {"tags"}}},
	"virtualmachinescalesetvmclient.yaml": {Ignore: map[int][]string{0: {"tags"}}},
	"virtualmachineclient.yaml":           {Ignore: map[int][]string{0: {"tags"}}},
	"availabilitysetclient.yaml":          {Ignore: map[int][]string{0: {"tags"}}},
	// Created its resource group, which an Azure Policy tagged
	// ("tags":{"Created":...}). Its #3, the final GET of a virtual network
	// after the PUT that created it, lacks the ETag header that the very
	// same request carries in every other recording (interfaceclient #3,
	// subnetclient #3, virtualnetworkclient #3, virtualmachineclient #3).
	"servicegatewayclient.yaml": {Ignore: map[int][]string{0: {"tags"}}, IgnoreHeaders: map[int][]string{3: {"Etag"}}},
}

// OptionsFor returns the replay options for a cassette file name.
func OptionsFor(name string) Options { return KnownDivergences[name] }
