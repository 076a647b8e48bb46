'use strict'
// Which prebuilt addon this machine needs: its napi-rs platform name (`linux-x64-gnu`), the
// file name `napi build --platform` gives the addon, and the npm package that ships it.
function abi() {
  if (process.platform !== 'linux') return ''
  const report = process.report && process.report.getReport ? process.report.getReport() : null
  const glibc = report && report.header && report.header.glibcVersionRuntime
  return glibc ? '-gnu' : '-musl'
}

function platformName() {
  const suffix = process.platform === 'win32' ? '-msvc' : abi()
  return `${process.platform}-${process.arch}${suffix}`
}

/** The platform names whose addon loads here, best first. On Windows the published addon is
 * built with MinGW-w64 (`win32-x64-gnu`, scripts/targets): Node-API is a C ABI, so it loads in
 * the official, MSVC-built Node as well; a source build there names its addon `-msvc`. */
function platformNames() {
  const name = platformName()
  return process.platform === 'win32' ? [name, name.replace(/-msvc$/, '-gnu')] : [name]
}

function addonFile(name = platformName()) {
  return `herdless.${name}.node`
}

function platformPackage(name = platformName()) {
  return `herdless-${name}`
}

module.exports = { addonFile, platformName, platformNames, platformPackage }
