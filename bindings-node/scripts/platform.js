'use strict'
// The file name `napi build --platform` gives the addon on this machine.
function abi() {
  if (process.platform !== 'linux') return ''
  const report = process.report && process.report.getReport ? process.report.getReport() : null
  const glibc = report && report.header && report.header.glibcVersionRuntime
  return glibc ? '-gnu' : '-musl'
}

function addonFile() {
  const arch = process.arch
  const platform = process.platform === 'win32' ? 'win32' : process.platform
  const suffix = process.platform === 'win32' ? '-msvc' : abi()
  return `herdless.${platform}-${arch}${suffix}.node`
}

module.exports = { addonFile }
